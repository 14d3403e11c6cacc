"""Sample v2 app with a blob trigger (copied into a temp dir as function_app.py): each
invocation appends what the function saw to the file named by BLOB_OUT; content starting with
"fail" raises."""

from __future__ import annotations

import json
import os
from pathlib import Path

import azure.functions as func

app = func.FunctionApp()


@app.blob_trigger(arg_name="blob", path="%BLOB_CONTAINER%/{name}.txt", connection="Data")
def on_blob(blob: func.InputStream) -> None:
    content = blob.read().decode("utf-8")
    seen = {
        "name": blob.name,
        "length": blob.length,
        "uri": blob.uri,
        "content": content,
        "etag": (getattr(blob, "blob_properties", None) or {}).get("ETag"),
        "pid": os.getpid(),
    }
    with Path(os.environ["BLOB_OUT"]).open("a", encoding="utf-8") as out:
        out.write(json.dumps(seen) + "\n")
    if content.startswith("fail"):
        raise RuntimeError("failing as asked")
