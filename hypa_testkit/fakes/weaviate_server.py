"""A small fake Weaviate (REST + gRPC) on 127.0.0.1, for tests that drive the REAL weaviate-client v4.

What weaviate-client 4.x needs from a server, and so what this fake speaks:
  * REST: GET /v1/meta (version), /v1/.well-known/ready and /openid-configuration (404: no OIDC),
    GET|POST|DELETE /v1/schema[/{name}] (collection configs, stored as sent), POST
    /v1/schema/{name}/properties (a property added to a stored config);
  * gRPC (weaviate.v1.Weaviate, stubs shipped in weaviate/proto): the health check, BatchObjects,
    BatchDelete, Search (fetch_objects with EQUAL / NOT_EQUAL / AND filters and `after` paging;
    hybrid), TenantsGet.

It is a store with filters, not a search engine: a hybrid Search is answered by ranking the filtered
objects by cosine similarity to the request's vector and reporting that as the score. Tests use it to
check what the client sends (`fake.searches`, `fake.batches`: the decoded protobuf requests) and how
the replies map back. Failure knobs: `fake.reject = lambda props: "message" | None` makes BatchObjects
fail objects; `fake.batch_abort = "message"` fails whole BatchObjects calls with gRPC INTERNAL;
`fake.delete_limit = n` deletes at most n objects per BatchDelete (Weaviate: QUERY_MAXIMUM_RESULTS);
`fake.delete_fails = True` reports every matched object as failed; `fake.schema_status = 500` makes
GET /v1/schema/{name} answer that status; `fake.request_abort = "message"` fails every Search,
BatchDelete and TenantsGet call with gRPC INTERNAL (a server that is reached but fails requests).
"""
from __future__ import annotations

import json
import re
import threading
import uuid as uuid_lib
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import numpy as np
from google.protobuf.json_format import MessageToDict
from weaviate.proto.v1 import (
    base_pb2,
    batch_delete_pb2,
    batch_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    tenants_pb2,
    weaviate_pb2_grpc,
)

SERVER_VERSION = "1.32.0"


@dataclass
class StoredObject:
    uuid: str
    properties: dict[str, Any]
    vector: np.ndarray | None


@dataclass
class FakeWeaviateState:
    schemas: dict[str, dict] = field(default_factory=dict)
    # class name -> tenant ("" without multi-tenancy) -> uuid -> object
    objects: dict[str, dict[str, dict[str, StoredObject]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bucket(self, collection: str, tenant: str) -> dict[str, StoredObject]:
        return self.objects.setdefault(collection, {}).setdefault(tenant, {})


def _int_properties(schema: dict | None) -> set[str]:
    if not schema:
        return set()
    return {p["name"] for p in schema.get("properties", []) if p.get("dataType") == ["int"]}


def _property_with_defaults(prop: dict) -> dict:
    """A property as Weaviate stores it: the index flags and text tokenization it fills in when the
    client leaves them out (weaviate-client's config parser expects them)."""
    text = prop.get("dataType", [""])[0] in ("text", "text[]")
    return {
        "indexFilterable": True, "indexSearchable": text, "indexRangeFilters": False,
        **({"tokenization": "word"} if text else {}), **prop,
    }


# What Weaviate fills into an HNSW index config the client sent without these keys (its defaults).
_HNSW_DEFAULTS = {
    "skip": False, "cleanupIntervalSeconds": 300, "maxConnections": 32, "efConstruction": 128, "ef": -1,
    "dynamicEfMin": 100, "dynamicEfMax": 500, "dynamicEfFactor": 8, "vectorCacheMaxObjects": 1_000_000_000_000,
    "flatSearchCutoff": 40000, "distance": "cosine", "filterStrategy": "sweeping",
}


def _class_with_defaults(schema: dict) -> dict:
    """A collection config as Weaviate returns it: properties and named HNSW vector indexes completed."""
    vectors = {}
    for name, vector in (schema.get("vectorConfig") or {}).items():
        vector = {"vectorIndexType": "hnsw", **vector}
        if vector["vectorIndexType"] == "hnsw":
            vector["vectorIndexConfig"] = {**_HNSW_DEFAULTS, **(vector.get("vectorIndexConfig") or {})}
        vectors[name] = vector
    completed = {**schema, "properties": [_property_with_defaults(p) for p in schema.get("properties", [])]}
    if vectors:
        completed["vectorConfig"] = vectors
    return completed


def _decode_vector(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


def _matches(obj: StoredObject, flt: base_pb2.Filters) -> bool:
    op = flt.operator
    if op == base_pb2.Filters.OPERATOR_AND:
        return all(_matches(obj, f) for f in flt.filters)
    if op == base_pb2.Filters.OPERATOR_OR:
        return any(_matches(obj, f) for f in flt.filters)
    name = flt.target.property or (flt.on[0] if flt.on else "")
    value = obj.properties.get(name)
    kind = flt.WhichOneof("test_value")
    expected = getattr(flt, kind) if kind else None
    if op == base_pb2.Filters.OPERATOR_EQUAL:
        return value == expected
    if op == base_pb2.Filters.OPERATOR_NOT_EQUAL:
        return value != expected
    raise NotImplementedError(f"fake Weaviate: filter operator {op} not supported")


def _value(v: Any) -> properties_pb2.Value:
    if isinstance(v, bool):
        return properties_pb2.Value(bool_value=v)
    if isinstance(v, int):
        return properties_pb2.Value(int_value=v)
    if isinstance(v, float):
        return properties_pb2.Value(number_value=v)
    return properties_pb2.Value(text_value=str(v))


def _hybrid_vector(hybrid) -> np.ndarray | None:
    for vectors in (hybrid.vectors, hybrid.near_vector.vectors):
        if len(vectors):
            return _decode_vector(vectors[0].vector_bytes)
    if hybrid.vector_bytes:
        return _decode_vector(hybrid.vector_bytes)
    if hybrid.near_vector.vector_bytes:
        return _decode_vector(hybrid.near_vector.vector_bytes)
    if len(hybrid.vector):
        return np.asarray(hybrid.vector, dtype=np.float32)
    return None


class _Servicer(weaviate_pb2_grpc.WeaviateServicer):
    def __init__(self, fake: FakeWeaviate) -> None:
        self.fake = fake

    def BatchObjects(self, request, context):
        state = self.fake.state
        self.fake.batches.append(request)
        if self.fake.batch_abort:
            context.abort(grpc.StatusCode.INTERNAL, self.fake.batch_abort)
        errors = []
        with state.lock:
            for i, obj in enumerate(request.objects):
                props = MessageToDict(obj.properties.non_ref_properties)
                ints = _int_properties(state.schemas.get(obj.collection))
                props = {k: int(v) if k in ints else v for k, v in props.items()}
                if obj.collection not in state.schemas:
                    errors.append(batch_pb2.BatchObjectsReply.BatchError(index=i, error=f"class {obj.collection} not found"))
                    continue
                message = self.fake.reject(props) if self.fake.reject else None
                if message:
                    errors.append(batch_pb2.BatchObjectsReply.BatchError(index=i, error=message))
                    continue
                vector = None
                if len(obj.vectors):
                    vector = _decode_vector(obj.vectors[0].vector_bytes)
                elif obj.vector_bytes:
                    vector = _decode_vector(obj.vector_bytes)
                state.bucket(obj.collection, obj.tenant)[obj.uuid] = StoredObject(obj.uuid, props, vector)
        return batch_pb2.BatchObjectsReply(took=0.001, errors=errors)

    def BatchDelete(self, request, context):
        if self.fake.request_abort:
            context.abort(grpc.StatusCode.INTERNAL, self.fake.request_abort)
        state = self.fake.state
        with state.lock:
            bucket = state.bucket(request.collection, request.tenant)
            doomed = [u for u, o in bucket.items() if _matches(o, request.filters)][: self.fake.delete_limit]
            if self.fake.delete_fails:
                return batch_delete_pb2.BatchDeleteReply(took=0.001, matches=len(doomed), failed=len(doomed))
            if not request.dry_run:
                for u in doomed:
                    del bucket[u]
        return batch_delete_pb2.BatchDeleteReply(took=0.001, matches=len(doomed), successful=len(doomed))

    def TenantsGet(self, request, context):
        if self.fake.request_abort:
            context.abort(grpc.StatusCode.INTERNAL, self.fake.request_abort)
        with self.fake.state.lock:
            names = sorted(t for t, objs in self.fake.state.objects.get(request.collection, {}).items() if t)
        return tenants_pb2.TenantsGetReply(
            took=0.001,
            tenants=[tenants_pb2.Tenant(name=n, activity_status=tenants_pb2.TENANT_ACTIVITY_STATUS_ACTIVE) for n in names],
        )

    def Search(self, request, context):
        self.fake.searches.append(request)
        if self.fake.request_abort:
            context.abort(grpc.StatusCode.INTERNAL, self.fake.request_abort)
        state = self.fake.state
        with state.lock:
            if request.collection not in state.schemas:
                context.abort(grpc.StatusCode.UNKNOWN, f"class {request.collection} not found")
            bucket = state.objects.get(request.collection, {}).get(request.tenant, {})
            hits = [o for o in bucket.values() if not request.HasField("filters") or _matches(o, request.filters)]
        scores: dict[str, float] = {}
        if request.HasField("hybrid_search"):
            query = _hybrid_vector(request.hybrid_search)
            for o in hits:
                if o.vector is not None and query is not None:
                    scores[o.uuid] = float(o.vector @ query / (np.linalg.norm(o.vector) * np.linalg.norm(query) or 1))
            hits = sorted(hits, key=lambda o: (-scores.get(o.uuid, -2.0), o.uuid))
        else:
            hits = sorted(hits, key=lambda o: o.uuid)
            if request.after:
                hits = [o for o in hits if o.uuid > request.after]
        hits = hits[request.offset:][: request.limit or 10]
        wanted = set(request.properties.non_ref_properties)
        results = []
        for o in hits:
            fields = {k: _value(v) for k, v in o.properties.items() if not wanted or k in wanted}
            metadata = search_get_pb2.MetadataResult(id=o.uuid, id_as_bytes=uuid_lib.UUID(o.uuid).bytes)
            if o.uuid in scores:
                metadata.score, metadata.score_present = scores[o.uuid], True
            results.append(search_get_pb2.SearchResult(
                properties=search_get_pb2.PropertiesResult(non_ref_props=properties_pb2.Properties(fields=fields)),
                metadata=metadata,
            ))
        return search_get_pb2.SearchReply(took=0.001, results=results)


def _health_check(request, context):
    return health_weaviate_pb2.WeaviateHealthCheckResponse(
        status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING
    )


class _RestHandler(BaseHTTPRequestHandler):
    fake: FakeWeaviate  # set on the per-server subclass

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> None:
        self.fake.rest_requests.append((self.command, self.path, dict(self.headers)))

    def do_GET(self) -> None:
        self._record()
        path = self.path.split("?")[0]
        if path == "/v1/meta":
            self._send(200, {"version": SERVER_VERSION, "hostname": "http://[::]:8080", "modules": {}})
        elif path == "/v1/.well-known/ready":
            self._send(200 if self.fake.ready else 503)
        elif path == "/v1/.well-known/openid-configuration":
            self._send(404, {"error": [{"message": "no oidc"}]})
        elif re.fullmatch(r"/v1/schema/([^/]+)", path) and self.fake.schema_status:
            self._send(self.fake.schema_status, {"error": [{"message": "fake Weaviate: schema unavailable"}]})
        elif m := re.fullmatch(r"/v1/schema/([^/]+)", path):
            schema = self.fake.state.schemas.get(m.group(1))
            self._send(200, schema) if schema else self._send(404)
        elif path == "/v1/schema":
            self._send(200, {"classes": list(self.fake.state.schemas.values())})
        else:
            self._send(404, {"error": [{"message": f"fake Weaviate: no GET {path}"}]})

    def do_POST(self) -> None:
        self._record()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.split("?")[0] == "/v1/schema":
            with self.fake.state.lock:
                self.fake.state.schemas[body["class"]] = _class_with_defaults(body)
            self._send(200, body)
        elif m := re.fullmatch(r"/v1/schema/([^/]+)/properties", self.path.split("?")[0]):
            with self.fake.state.lock:
                schema = self.fake.state.schemas.get(m.group(1))
                if schema is not None:
                    schema.setdefault("properties", []).append(_property_with_defaults(body))
            self._send(200, body) if schema is not None else self._send(404)
        else:
            self._send(404, {"error": [{"message": f"fake Weaviate: no POST {self.path}"}]})

    def do_DELETE(self) -> None:
        self._record()
        if m := re.fullmatch(r"/v1/schema/([^/]+)", self.path.split("?")[0]):
            with self.fake.state.lock:
                self.fake.state.schemas.pop(m.group(1), None)
                self.fake.state.objects.pop(m.group(1), None)
            self._send(200)
        else:
            self._send(404)


class FakeWeaviate:
    """`with FakeWeaviate() as fake: connect_weaviate(fake.url, fake.grpc_port)`."""

    def __init__(self) -> None:
        self.state = FakeWeaviateState()
        self.searches: list[search_get_pb2.SearchRequest] = []
        self.batches: list[batch_pb2.BatchObjectsRequest] = []
        self.rest_requests: list[tuple[str, str, dict]] = []
        self.reject: Callable[[dict], str | None] | None = None
        self.batch_abort = ""
        self.request_abort = ""
        self.delete_limit: int | None = None
        self.delete_fails = False
        self.schema_status = 0
        self.ready = True
        handler = type("Handler", (_RestHandler,), {"fake": self})
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        weaviate_pb2_grpc.add_WeaviateServicer_to_server(_Servicer(self), self._grpc)
        self._grpc.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "grpc.health.v1.Health",
            {"Check": grpc.unary_unary_rpc_method_handler(
                _health_check,
                request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
                response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString,
            )},
        ),))
        self.grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def objects(self, collection: str, tenant: str = "") -> list[StoredObject]:
        with self.state.lock:
            return list(self.state.objects.get(collection, {}).get(tenant, {}).values())

    def __enter__(self) -> FakeWeaviate:
        self._grpc.start()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=None)
