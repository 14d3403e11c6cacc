"""funcstack's own tests: the stand-ins through the unmodified SDKs, the Functions host, the
command and the pytest plugin (its tests run pytest on test files of their own)."""

pytest_plugins = ["pytester"]
