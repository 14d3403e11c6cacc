"""Blob input and output bindings, as the Storage Blobs extension 5.x serves them to a script
worker (Azure/azure-sdk-for-net, ``Microsoft.Azure.WebJobs.Extensions.Storage.Blobs``:
``BlobsExtensionConfigProvider``, ``BlobAttribute``; the host's ``FunctionBinding``
``BindStreamAsync``; "Azure Blob storage input/output binding" on learn.microsoft.com):

* ``path`` is ``<container>/<blob name>``, either part with ``{...}`` expressions resolved per
  invocation (``{name}`` of a blob trigger, ``{id}`` of a route...); a path naming only a
  container binds a container client, which a Python worker cannot receive: refused. A
  container name that is not valid is refused at indexing (a literal one) or fails the
  invocation (one an expression made), as ``BlobPath`` checks it.
* ``connection``: a storage connection (``_connections``: a connection string, or
  ``<connection>__blobServiceUri`` / ``__serviceUri`` / ``__accountName``); empty means
  ``AzureWebJobsStorage``.
* Input: the blob read whole; ``dataType: binary`` hands the worker its bytes, otherwise
  (``string``, or none: the host's default) its text as a ``StreamReader`` reads it (a BOM
  says the encoding, else UTF-8, invalid bytes replaced); a blob or container that does not
  exist is null (the function gets ``None``). ``dataType: stream`` is refused.
* Output: the value written as the blob's content, replacing it (bytes as they are, text in
  UTF-8, a JSON value compact: ``values.stream_bytes``); the container is created when it does
  not exist. A failed write fails the invocation.
"""

from __future__ import annotations

import codecs
import contextlib
import logging
import re
from typing import TYPE_CHECKING

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError

from funcstack.functions_host._bindings.base import BindingError, BindingRefusedError, ClientBinding
from funcstack.functions_host._bindings.expressions import ExpressionError, Template
from funcstack.functions_host._bindings.values import BindingValueError, stream_bytes, to_typed_data

if TYPE_CHECKING:
    from funcstack.functions_host._bindings.base import BindingDecl, BindingEnv
    from funcstack.functions_host._bindings.expressions import BindingData
    from funcstack.functions_host._bindings.values import HostValue

logger = logging.getLogger("funcstack.functions_host.bindings")

__all__ = ["BlobInput", "BlobOutput", "blob_path", "stream_text"]

DEFAULT_CONNECTION = "AzureWebJobsStorage"


def blob_path(decl: BindingDecl) -> tuple[Template, Template]:
    """The binding's ``path`` as (container, blob name) templates."""
    path = decl.text("path").strip()
    if not path:
        raise BindingRefusedError("a blob binding needs 'path' (<container>/<blob name>)")
    container, sep, name = path.lstrip("/").partition("/")
    if not sep or not name:
        raise BindingRefusedError(
            f"path {path!r} names a container only: the extension binds a container client "
            "there, which a Python function cannot receive; give <container>/<blob name>"
        )
    try:
        container_template, name_template = Template.parse(container), Template.parse(name)
    except ExpressionError as exc:
        raise BindingRefusedError(f"path: {exc}") from None
    if container_template.is_literal:
        problem = container_problem(container)
        if problem is not None:
            raise BindingRefusedError(problem)
    return container_template, name_template


_CONTAINER_NAME = re.compile(r"^(\$root|\$web|[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9])$")


def container_problem(name: str) -> str | None:
    """``BlobPath``'s check of a container name (3-63 lower-case letters, digits and single
    dashes; ``$root``, ``$web``), or None."""
    if _CONTAINER_NAME.match(name):
        return None
    return (
        f"the container name {name!r} is not valid: 3-63 lower-case letters, digits and "
        "single dashes, starting and ending with a letter or digit"
    )


def stream_text(content: bytes) -> str:
    """The blob's text as .NET's ``StreamReader`` reads it: a BOM says the encoding (UTF-8,
    UTF-16, UTF-32), else UTF-8; invalid bytes become U+FFFD."""
    for bom, encoding in (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
    ):
        if content.startswith(bom):
            return content[len(bom) :].decode(encoding, "replace")
    return content.decode("utf-8", "replace")


class _BlobBinding(ClientBinding):
    kind = "blobs"
    default_connection = DEFAULT_CONNECTION

    def __init__(self, decl: BindingDecl, env: BindingEnv) -> None:
        super().__init__(decl, env)
        self._container, self._blob = blob_path(decl)
        self.data_type = decl.data_type
        if self.data_type == "stream":
            raise BindingRefusedError(
                "dataType 'stream' is not served (a Python function takes the blob as "
                "bytes, str or func.InputStream: leave dataType out, or 'binary')"
            )

    def _where(self, data: BindingData) -> tuple[str, str]:
        try:
            container, blob = self._container.bind(data), self._blob.bind(data)
        except ExpressionError as exc:
            raise BindingError(f"Exception binding parameter '{self.name}': {exc}") from None
        problem = container_problem(container)
        if problem is not None:
            raise BindingError(f"Exception binding parameter '{self.name}': {problem}")
        return container, blob


class BlobInput(_BlobBinding):
    """``[Blob(path, FileAccess.Read)]``: the blob's content, or null."""

    async def read(self, data: BindingData) -> object:
        container, blob = self._where(data)
        client = self._env.clients.blobs(self._connection).get_blob_client(container, blob)
        try:
            downloader = await client.download_blob()
            content = await downloader.readall()
        except ResourceNotFoundError:
            return to_typed_data(None)
        except AzureError as exc:
            raise BindingError(
                f"Exception binding parameter '{self.name}': reading blob {container}/{blob}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        return to_typed_data(content if self.data_type == "binary" else stream_text(content))


class BlobOutput(_BlobBinding):
    """``[Blob(path, FileAccess.Write)]``: the value as the blob's content."""

    async def write(self, value: HostValue, data: BindingData) -> None:
        container, blob = self._where(data)
        try:
            content = stream_bytes(value)
        except BindingValueError as exc:
            raise BindingError(f"output '{self.name}' (blob): {exc}") from None
        service = self._env.clients.blobs(self._connection)
        client = service.get_blob_client(container, blob)
        try:
            try:
                await client.upload_blob(content, overwrite=True)
            except ResourceNotFoundError:  # ContainerNotFound: the extension creates it
                with contextlib.suppress(ResourceExistsError):
                    await service.create_container(container)
                await client.upload_blob(content, overwrite=True)
        except AzureError as exc:
            raise BindingError(
                f"output '{self.name}' (blob): writing {container}/{blob}: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        logger.debug("blob output %s: %d bytes to %s/%s", self.name, len(content), container, blob)
