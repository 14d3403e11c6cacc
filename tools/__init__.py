"""This app's own tooling, beside the product code and never deployed with it: the local stack
wired for this app (`python -m tools`, `make run`), provisioning of its database and containers,
`make status`, `make tail`, and the operators' CLI (`python -m tools.admin`), which works against
the app in Azure too. The local stand-ins for Azure it builds on are in emulators/, which knows
nothing of this app."""
