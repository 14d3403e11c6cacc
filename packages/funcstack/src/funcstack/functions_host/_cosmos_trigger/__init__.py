"""The Cosmos DB trigger, one room: the listener the runner starts for a ``cosmosDBTrigger``
function (``listener``), on the change feed processor of the cosmos-changefeed package (one
implementation of the lease protocol in the repository: the .NET processor's, leases in its
schema), and the binding as the extension reads it:

* ``options``: the binding's settings read and checked as the extension reads them;
* ``mode``: the ``changeFeedMode`` the indexer serves or refuses;
* ``listener``: the processor built as the extension builds .NET's, each batch an invocation.

Nothing is imported here: the runner imports ``listener`` when an app has a function of this
trigger type (a host of an HTTP-only app never loads the Cosmos DB SDK)."""
