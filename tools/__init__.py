"""This app's own tooling, beside the product code and never deployed with it: the local stack
wired for this app (`python -m tools`, `make run`), provisioning of its database and containers,
`make status`, `make tail`, and the operators' CLI with this repository's names (`python -m
tools.admin`: the package's `cosmos-outbox`), which works against
the app in Azure too. The local stack it builds on is funcstack (packages/funcstack), which knows
nothing of this app; this app's declared resources for it are funcstack.json and
servicebus-config.json here."""
