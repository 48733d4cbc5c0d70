"""A tiny in-process fake of the Hugging Face Hub HTTP API, for tests without network.

The fake sits at the HTTP boundary only: the real ``huggingface_hub`` client (and ``transformers``
on top of it) builds and sends real requests to a local ``http.server`` on ``127.0.0.1``. Nothing
in the client is mocked, so a test that passes here exercises the same code paths as a real push.

Endpoints implemented (what huggingface_hub 2.4 calls for a create/upload/download round trip):

- ``POST /api/repos/create``                                  -> ``create_repo``
- ``POST /api/validate-yaml``                                 -> README.md check in ``create_commit``
- ``POST /api/{type}s/{repo_id}/preupload/{revision}``        -> upload mode of each file ("regular")
- ``POST /api/{type}s/{repo_id}/commit/{revision}``           -> ndjson commit (base64 file contents)
- ``HEAD|GET /[{type}s/]{repo_id}/resolve/{revision}/{path}`` -> ``hf_hub_download``
- ``GET /api/{type}s/{repo_id}[/revision/{revision}]``        -> ``repo_info`` / ``model_info``
- ``GET /api/whoami-v2``                                      -> ``whoami``
- ``GET /api/agent-harnesses`` (client telemetry, answered 404 on purpose: nothing gets cached)

Every file is answered as a "regular" (non-LFS, non-Xet) upload, so no storage backend is needed.
Anything else is answered 404 and recorded in ``FakeHub.unhandled`` so a test can show what a
newer client started calling.

Example (a pytest fixture)::

    import pytest
    from fake_hub import fake_hub

    @pytest.fixture
    def hub():
        with fake_hub() as hub:
            yield hub

    def test_push(hub, tmp_path):
        (tmp_path / "a.txt").write_text("hi")
        api = huggingface_hub.HfApi(endpoint=hub.endpoint, token=hub.token)
        api.create_repo("me/model")
        api.upload_folder(repo_id="me/model", folder_path=tmp_path)
        assert hub.uploaded["me/model"]["a.txt"] == b"hi"

Inside ``fake_hub()`` the *default* endpoint is also redirected (``huggingface_hub.constants``,
the module-level ``HfApi`` behind ``huggingface_hub.upload_folder`` & co, and the shared ``HfApi``
of ``transformers.utils.hub``), ``HF_TOKEN`` is set to a dummy token and the download cache is a
temporary folder, so ``Trainer.push_to_hub()`` and ``hf_hub_download(repo_id, ...)`` work unchanged.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["FakeHub", "fake_hub"]

DEFAULT_USER = "hdet-tester"
DEFAULT_TOKEN = "hf_fake_token_for_tests"
_REPO_TYPES = ("model", "dataset", "space")


def git_blob_sha1(data: bytes) -> str:
    """The git object id of ``data``: what the Hub uses as ETag and ``oid`` of regular files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class _Repo:
    repo_type: str
    repo_id: str
    files: dict[str, bytes] = field(default_factory=dict)
    # commit sha -> snapshot of files, so a download pinned to a commit sees that commit's bytes.
    snapshots: dict[str, dict[str, bytes]] = field(default_factory=dict)
    head: str = ""

    def commit(self, summary: str) -> str:
        digest = hashlib.sha1(f"{self.head}\n{summary}\n{len(self.snapshots)}".encode())
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + git_blob_sha1(self.files[path]).encode())
        self.head = digest.hexdigest()
        self.snapshots[self.head] = dict(self.files)
        return self.head


class FakeHub:
    """State and HTTP server of one fake Hub; use through :func:`fake_hub`.

    Attributes:
        endpoint: base URL to give clients (``HfApi(endpoint=...)``, ``hf_hub_download(endpoint=...)``).
        token: the dummy token; write endpoints answer 401 without a bearer token.
        user: namespace given to repos created without one.
        uploaded: ``repo_id -> {path_in_repo: bytes}`` of every file received in a commit
            (last write wins). Seeded files are not in here.
        commits: one dict per commit received (repo_id, revision, summary, paths).
        requests: ``(method, path)`` of every request, in order.
        unhandled: ``(method, path)`` of requests the fake does not implement.
    """

    def __init__(self, user: str = DEFAULT_USER, token: str = DEFAULT_TOKEN) -> None:
        self.user = user
        self.token = token
        self.uploaded: dict[str, dict[str, bytes]] = {}
        self.commits: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.unhandled: list[tuple[str, str]] = []
        self._repos: dict[tuple[str, str], _Repo] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-hub", daemon=True
        )

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- test helpers ------------------------------------------------------------------------

    def create_repo(self, repo_id: str, repo_type: str = "model") -> None:
        """Create an empty repo (as if someone had pushed it before the test)."""
        with self._lock:
            self._get_or_create(repo_type, repo_id)

    def seed(self, repo_id: str, path_in_repo: str, data: bytes | str, repo_type: str = "model") -> str:
        """Put a file in a repo (created if needed) so it can be downloaded; returns the new commit sha."""
        payload = data.encode() if isinstance(data, str) else bytes(data)
        with self._lock:
            repo = self._get_or_create(repo_type, repo_id)
            repo.files[path_in_repo] = payload
            return repo.commit(f"seed {path_in_repo}")

    def files(self, repo_id: str, repo_type: str = "model") -> dict[str, bytes]:
        """The current content of a repo's main branch (seeded and uploaded files)."""
        with self._lock:
            repo = self._repos.get((repo_type, repo_id))
            return dict(repo.files) if repo is not None else {}

    # -- internals -----------------------------------------------------------------------------

    def _get_or_create(self, repo_type: str, repo_id: str) -> _Repo:
        key = (repo_type, repo_id)
        if key not in self._repos:
            repo = _Repo(repo_type=repo_type, repo_id=repo_id)
            repo.commit("initial commit")
            self._repos[key] = repo
        return self._repos[key]

    def _repo_url(self, repo_type: str, repo_id: str) -> str:
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        return f"{self.endpoint}/{prefix}{repo_id}"


def _make_handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    type_alt = "|".join(f"{t}s" for t in _REPO_TYPES)
    repo = r"(?P<repo_id>[^/]+/[^/]+)"
    api_repo = rf"^/api/(?P<type>{type_alt})/{repo}"
    resolve = re.compile(rf"^/(?:(?P<type>{type_alt})/)?{repo}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
    routes: list[tuple[str, re.Pattern[str], str]] = [
        ("POST", re.compile(r"^/api/repos/create$"), "_create_repo"),
        ("POST", re.compile(r"^/api/validate-yaml$"), "_validate_yaml"),
        ("GET", re.compile(r"^/api/whoami-v2$"), "_whoami"),
        ("GET", re.compile(r"^/api/agent-harnesses$"), "_not_served"),
        ("POST", re.compile(api_repo + r"/preupload/(?P<rev>[^/]+)$"), "_preupload"),
        ("POST", re.compile(api_repo + r"/commit/(?P<rev>[^/]+)$"), "_commit"),
        ("GET", re.compile(api_repo + r"(?:/revision/(?P<rev>[^/]+))?$"), "_repo_info"),
        ("HEAD", resolve, "_resolve"),
        ("GET", resolve, "_resolve"),
    ]

    class Handler(BaseHTTPRequestHandler):
        server_version = "FakeHub/1.0"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base-class signature
            pass  # keep pytest output clean; `hub.requests` has the log

        # -- dispatch --------------------------------------------------------------------------

        def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
            self._dispatch("HEAD")

        def do_GET(self) -> None:  # noqa: N802
            self._dispatch("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._dispatch("POST")

        def do_PUT(self) -> None:  # noqa: N802
            self._dispatch("PUT")

        def do_DELETE(self) -> None:  # noqa: N802
            self._dispatch("DELETE")

        def _dispatch(self, method: str) -> None:
            path = urlsplit(self.path).path
            hub.requests.append((method, path))
            for route_method, pattern, name in routes:
                match = pattern.match(path)
                if route_method == method and match:
                    groups = {k: unquote(v) if v is not None else None for k, v in match.groupdict().items()}
                    try:
                        getattr(self, name)(**groups)
                    except Exception as exc:  # report server bugs to the client instead of hanging it
                        self._json(500, {"error": f"fake hub crashed: {exc!r}"})
                    return
            hub.unhandled.append((method, path))
            self._json(404, {"error": f"fake hub: {method} {path} is not implemented"})

        # -- helpers ---------------------------------------------------------------------------

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            headers = {"Content-Type": "application/json", **(headers or {})}
            self._send(status, json.dumps(payload).encode(), headers)

        def _authorized(self) -> bool:
            if self.headers.get("Authorization", "").startswith("Bearer "):
                return True
            self._json(401, {"error": "Invalid credentials in Authorization header"})
            return False

        def _repo_or_404(self, type_plural: str | None, repo_id: str) -> _Repo | None:
            repo_type = (type_plural or "models")[:-1]
            found = hub._repos.get((repo_type, repo_id))
            if found is None:
                self._json(
                    404,
                    {"error": "Repository not found"},
                    {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"},
                )
            return found

        def _files_at(self, repo: _Repo, rev: str | None) -> tuple[str, dict[str, bytes]] | None:
            # One branch only: "main" (or no revision) is HEAD; a known commit sha is its snapshot.
            if rev in (None, "main"):
                return repo.head, repo.files
            if rev in repo.snapshots:
                return rev, repo.snapshots[rev]
            self._json(
                404,
                {"error": f"Invalid rev id: {rev}"},
                {"X-Error-Code": "RevisionNotFound", "X-Error-Message": f"Invalid rev id: {rev}"},
            )
            return None

        # -- endpoints -------------------------------------------------------------------------

        def _create_repo(self) -> None:
            if not self._authorized():
                return
            payload = json.loads(self._body() or b"{}")
            repo_type = payload.get("type") or "model"
            repo_id = f"{payload.get('organization') or hub.user}/{payload['name']}"
            url = hub._repo_url(repo_type, repo_id)
            with hub._lock:
                exists = (repo_type, repo_id) in hub._repos
                hub._get_or_create(repo_type, repo_id)
            if exists:
                # Like the Hub: 409, and the body still carries the url (`exist_ok=True` reads it).
                self._json(409, {"error": "You already created this model repo", "url": url})
            else:
                self._json(200, {"url": url, "name": repo_id, "id": repo_id})

        def _not_served(self) -> None:
            # Best-effort telemetry the client tolerates failing; a 404 also keeps it from caching
            # the answer under the real HF_HOME.
            self._json(404, {"error": "not served by the fake hub"})

        def _validate_yaml(self) -> None:
            self._body()
            self._json(200, {"errors": [], "warnings": []})

        def _whoami(self) -> None:
            if not self._authorized():
                return
            self._json(
                200,
                {
                    "type": "user",
                    "name": hub.user,
                    "fullname": "HDET Tester",
                    "orgs": [],
                    "auth": {"type": "access_token", "accessToken": {"displayName": "fake", "role": "write"}},
                },
            )

        def _preupload(self, type: str, repo_id: str, rev: str) -> None:  # noqa: A002
            if not self._authorized():
                return
            payload = json.loads(self._body())
            with hub._lock:
                repo = self._repo_or_404(type, repo_id)
                if repo is None:
                    return
                files = [
                    {
                        "path": f["path"],
                        "uploadMode": "regular",
                        "shouldIgnore": False,
                        # The client skips files whose remote oid equals its local git sha1, like the Hub.
                        "oid": git_blob_sha1(repo.files[f["path"]]) if f["path"] in repo.files else None,
                    }
                    for f in payload["files"]
                ]
            self._json(200, {"files": files, "commitOid": repo.head})

        def _commit(self, type: str, repo_id: str, rev: str) -> None:  # noqa: A002
            if not self._authorized():
                return
            lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
            with hub._lock:
                repo = self._repo_or_404(type, repo_id)
                if repo is None:
                    return
                if rev != "main":
                    self._json(400, {"error": f"fake hub: commits to '{rev}' are not supported, only 'main'"})
                    return
                summary, paths = "", []
                for line in lines:
                    key, value = line["key"], line["value"]
                    if key == "header":
                        summary = value.get("summary", "")
                    elif key == "file":
                        if value.get("encoding") != "base64":
                            raise ValueError(f"unexpected encoding {value.get('encoding')!r}")
                        data = base64.b64decode(value["content"])
                        repo.files[value["path"]] = data
                        hub.uploaded.setdefault(repo_id, {})[value["path"]] = data
                        paths.append(value["path"])
                    elif key == "deletedFile":
                        repo.files.pop(value["path"], None)
                    elif key == "deletedFolder":
                        prefix = value["path"].rstrip("/") + "/"
                        for path in [p for p in repo.files if p.startswith(prefix)]:
                            del repo.files[path]
                    else:
                        # lfsFile/xet: preupload never asks for it, so a client sending it is a surprise.
                        self._json(400, {"error": f"fake hub: commit operation {key!r} is not supported"})
                        return
                sha = repo.commit(summary)
                hub.commits.append({"repo_id": repo_id, "revision": rev, "summary": summary, "paths": paths})
            self._json(
                200,
                {
                    "success": True,
                    "commitOid": sha,
                    "commitUrl": f"{hub._repo_url(repo.repo_type, repo_id)}/commit/{sha}",
                    "pullRequestUrl": None,
                },
            )

        def _repo_info(self, type: str, repo_id: str, rev: str | None) -> None:  # noqa: A002
            with hub._lock:
                repo = self._repo_or_404(type, repo_id)
                if repo is None:
                    return
                resolved = self._files_at(repo, rev)
                if resolved is None:
                    return
                sha, files = resolved
            self._json(
                200,
                {
                    "_id": repo_id,
                    "id": repo_id,
                    "author": repo_id.split("/")[0],
                    "sha": sha,
                    "private": False,
                    "disabled": False,
                    "gated": False,
                    "tags": [],
                    "siblings": [{"rfilename": p} for p in sorted(files)],
                },
            )

        def _resolve(self, type: str | None, repo_id: str, rev: str, path: str) -> None:  # noqa: A002
            with hub._lock:
                repo = self._repo_or_404(type, repo_id)
                if repo is None:
                    return
                resolved = self._files_at(repo, rev)
                if resolved is None:
                    return
                sha, files = resolved
                data = files.get(path)
            if data is None:
                self._json(
                    404,
                    {"error": "Entry not found"},
                    {
                        "X-Error-Code": "EntryNotFound",
                        "X-Error-Message": "Entry not found",
                        "X-Repo-Commit": sha,
                    },
                )
                return
            # hf_hub_download needs X-Repo-Commit and ETag (git sha1 for regular files) plus the size.
            self._send(
                200,
                data,
                {
                    "Content-Type": "application/octet-stream",
                    "ETag": f'"{git_blob_sha1(data)}"',
                    "X-Repo-Commit": sha,
                    "Accept-Ranges": "bytes",
                },
            )

    return Handler


@contextlib.contextmanager
def fake_hub(
    *,
    patch_default_endpoint: bool = True,
    user: str = DEFAULT_USER,
    token: str = DEFAULT_TOKEN,
) -> Iterator[FakeHub]:
    """Run a :class:`FakeHub` for the duration of a ``with`` block.

    Args:
        patch_default_endpoint: also send calls that do not pass ``endpoint=`` to the fake
            (``huggingface_hub.constants.ENDPOINT`` and URL template, the module-level ``HfApi``,
            transformers' shared ``HfApi``, ``HF_ENDPOINT``/``HF_TOKEN``, an empty download cache,
            offline mode off). Everything is restored on exit. With ``False`` only the server runs
            and clients must be given ``endpoint=hub.endpoint`` and ``token=hub.token``.
        user: namespace for repos created without one (what ``whoami`` reports).
        token: dummy token (no real credentials are ever read or sent).

    Example::

        with fake_hub() as hub:
            hub.seed("me/model", "hdet_schedule.json", b"{}")
            path = huggingface_hub.hf_hub_download("me/model", "hdet_schedule.json")
    """
    hub = FakeHub(user=user, token=token).start()
    restore: list[tuple[Any, str, Any]] = []
    env_before = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_TOKEN")}
    cache_dir = tempfile.mkdtemp(prefix="fake-hub-cache-")

    def patch(obj: Any, name: str, value: Any) -> None:
        restore.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    try:
        if patch_default_endpoint:
            import huggingface_hub.constants as constants
            import huggingface_hub.hf_api as hf_api

            # constants.ENDPOINT and the URL template are computed from HF_ENDPOINT at import time, and
            # the module-level HfApi behind `huggingface_hub.upload_folder` copied ENDPOINT at import.
            patch(constants, "ENDPOINT", hub.endpoint)
            template = hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
            patch(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
            patch(constants, "HF_HUB_CACHE", cache_dir)
            patch(constants, "HF_HUB_OFFLINE", False)
            patch(hf_api.api, "endpoint", hub.endpoint)
            # transformers keeps one shared HfApi (created on first use): drop it so the next one
            # is built with the patched endpoint; the old one comes back on exit.
            tf_hub = sys.modules.get("transformers.utils.hub")
            if tf_hub is not None and hasattr(tf_hub, "_hf_api"):
                patch(tf_hub, "_hf_api", None)
            os.environ["HF_ENDPOINT"] = hub.endpoint  # for subprocesses a test may spawn
            os.environ["HF_TOKEN"] = token
        yield hub
    finally:
        for obj, name, value in reversed(restore):
            setattr(obj, name, value)
        # transformers imported inside the block would keep an HfApi pointing at a dead server.
        tf_hub = sys.modules.get("transformers.utils.hub")
        if getattr(getattr(tf_hub, "_hf_api", None), "endpoint", None) == hub.endpoint:
            tf_hub._hf_api = None  # type: ignore[union-attr]
        for key, value in env_before.items():
            if not patch_default_endpoint:
                break
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        hub.close()
        shutil.rmtree(cache_dir, ignore_errors=True)
