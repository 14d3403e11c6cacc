"""The operators' command line (`cosmos-outbox`, `python -m cosmos_outbox`): the operators'
routes of any app on cosmos-outbox, over HTTP, with the admin key (`cosmos_outbox.cli` is its
public face). `_client`: the HTTP calls and their one-line errors; `_commands`: the commands,
their arguments and what each prints. Standard library only: nothing of the SDKs is imported."""
