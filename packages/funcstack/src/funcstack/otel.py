"""Local telemetry export: the OpenTelemetry SDK writing OTLP/JSON lines to files.

CONTRACT WITH THE LOCAL FUNCTIONS HOST (funcstack/functions_host/):

* Env var ``FUNCTIONS_HOST_OTEL_DIR`` (an app setting of the **local host only**; Azure has
  no such setting): when it is set, the host calls
  ``configure_file_exporters(Path(os.environ["FUNCTIONS_HOST_OTEL_DIR"]))`` once in the
  **worker process** (where the app runs), before the first invocation; ideally before the
  app is indexed, though instruments created earlier through the API's proxies are bound too.
* The service name is OpenTelemetry's own setting, ``OTEL_SERVICE_NAME`` (read by the SDK's
  ``Resource``; in Azure the exporter reads it too): set it per app.
* On shutdown the worker calls the returned ``shutdown()`` so the last spans and metric points
  are written (a killed worker loses at most one export interval).
* This is the local stand-in for what the Python worker does in Azure with
  ``PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY=true`` (it configures the Azure Monitor
  exporter). The app itself never calls this module; never set both.
* Output: ``<dir>/metrics.jsonl`` (one ``ExportMetricsServiceRequest`` per line, cumulative
  temporality, every ``interval_s``) and ``<dir>/traces.jsonl`` (one
  ``ExportTraceServiceRequest`` per batch of spans), in the OTLP/JSON encoding (lowerCamelCase
  fields, hex trace and span ids, enums as integers) that the OpenTelemetry Collector's file
  exporter and ``otlpjsonfile`` receiver use. Several apps may share one directory (lines are
  appended whole; each request names its service in its resource).
* The host passes ``context.trace_context`` from the request's ``traceparent`` header (a new
  one without it), as the Functions host does, so the work of a request shares its trace.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from funcstack._otel_setting import ENV_VAR

__all__ = [
    "ENV_VAR",
    "METRICS_FILE",
    "TRACES_FILE",
    "JsonLinesMetricExporter",
    "JsonLinesSpanExporter",
    "configure_file_exporters",
    "otlp_json",
]

METRICS_FILE = "metrics.jsonl"
TRACES_FILE = "traces.jsonl"
_HEX_ID_FIELDS = {"traceId", "spanId", "parentSpanId"}


def otlp_json(message: Message) -> dict[str, Any]:
    """A protobuf OTLP request as OTLP/JSON: ids hex, not base64 (the OTLP/JSON rule)."""
    data = MessageToDict(message, use_integers_for_enums=True)
    _hex_ids(data)
    return data


def _hex_ids(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _HEX_ID_FIELDS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)


class _JsonLines:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock, self._path.open("a", encoding="utf-8") as out:
            out.write(line)


class JsonLinesMetricExporter(MetricExporter):
    def __init__(self, path: Path) -> None:
        super().__init__()
        self._out = _JsonLines(path)

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        self._out.write(otlp_json(encode_metrics(metrics_data)))
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


class JsonLinesSpanExporter(SpanExporter):
    def __init__(self, path: Path) -> None:
        self._out = _JsonLines(path)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._out.write(otlp_json(encode_spans(spans)))
        return SpanExportResult.SUCCESS


def configure_file_exporters(
    directory: Path, *, interval_s: float = 5.0, service_name: str | None = None
) -> Callable[[], None]:
    """Install the SDK as the global meter and tracer providers, exporting to `directory`.
    The service name is `service_name`, else OTEL_SERVICE_NAME (the SDK's resource detection).
    Returns `shutdown()` (flushes). Call once per process."""
    resource = Resource.create({"service.name": service_name} if service_name else {})
    reader = PeriodicExportingMetricReader(
        JsonLinesMetricExporter(directory / METRICS_FILE),
        export_interval_millis=interval_s * 1000,
    )
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(JsonLinesSpanExporter(directory / TRACES_FILE))
    )
    metrics.set_meter_provider(meter_provider)
    trace.set_tracer_provider(tracer_provider)

    def shutdown() -> None:
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return shutdown
