"""`make bench` (bench/__main__.py) and its parts. A bench process trusts funcstack's local
authority as the hosts funcstack starts do (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, set here, before
a module of the bench imports an SDK: aiohttp reads its trust store once, when imported), so
its clients verify the local Cosmos DB endpoint's certificate as an app's do, on the same path
(the SDK's default transport, its connections pooled), and so do the processes it starts."""

import os

from funcstack.cosmos import local_tls

os.environ.update(local_tls().environment())
