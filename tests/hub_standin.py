"""A local stand-in for the Hugging Face Hub's HTTP API: a real HTTP server on 127.0.0.1 (port 0), serving repos
from a folder, for the real ``huggingface_hub`` client (pointed at it with ``HF_ENDPOINT``, in a subprocess: the
client reads its constants once, at import).

It implements what the client calls for ``create_repo``, ``create_branch``, ``upload_folder`` / ``create_commit``
(``validate-yaml``, ``preupload``: every file "regular", so no LFS; ``commit``: ndjson, base64 files),
``repo_info`` / ``model_info`` / ``dataset_info`` (with a revision), ``list_repo_tree``, and downloads
(``hf_hub_download``, ``snapshot_download``: ``resolve`` with the ETag, X-Repo-Commit and size headers), for
``repo_type`` model and dataset. Errors carry the ``X-Error-Code`` the client maps to its exceptions
(RepoNotFound, RevisionNotFound, EntryNotFound). Writes need a bearer token (the creator's, for an existing
repo); a private repo answers RepoNotFound to anyone without its creator's token.

    with HubStandin(tmp_path / "hub") as hub:
        hub.add_files("dataset", "org/corpora", {"en/a.txt": b"..."})        # seed a repo without the client
        subprocess.run([...], env={**os.environ, **hub.env(tmp_path / "hf-home")})
        hub.requests                                                         # (method, path, token) seen
"""
from __future__ import annotations

import base64
import hashlib
import json
import shutil
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

GITATTRIBUTES = b"*.npy filter=lfs diff=lfs merge=lfs -text\n"  # what the Hub commits first into a new repo


def git_oid(data: bytes) -> str:
    """The git blob id of ``data``: the ETag of a regular (non-LFS) file on the Hub."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


class Repos:
    """Repos on disk: ``<root>/<type>s/<org>/<name>/repo.json`` (branches, commits, privacy, owner's token) and
    ``commits/<sha>/``, each commit's whole tree."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.Lock()

    def folder(self, kind: str, repo_id: str) -> Path:
        return self.root / f"{kind}s" / repo_id

    def meta(self, kind: str, repo_id: str, token: str | None = None) -> dict:
        path = self.folder(kind, repo_id) / "repo.json"
        if not path.is_file():
            raise HubError(404, "RepoNotFound", f"Repository {repo_id} not found")
        meta = json.loads(path.read_text())
        if meta["private"] and token != meta["token"]:
            raise HubError(404, "RepoNotFound", f"Repository {repo_id} not found")
        return meta

    def save(self, kind: str, repo_id: str, meta: dict) -> None:
        (self.folder(kind, repo_id) / "repo.json").write_text(json.dumps(meta, indent=1))

    def create(self, kind: str, repo_id: str, private: bool, token: str | None) -> bool:
        """A new repo with one commit (.gitattributes) on main; False when it exists."""
        folder = self.folder(kind, repo_id)
        if (folder / "repo.json").is_file():
            return False
        folder.mkdir(parents=True)
        meta = {"private": private, "token": token, "branches": {}, "commits": {}}
        self.save(kind, repo_id, meta)
        self.commit(kind, repo_id, "main", "initial commit", {".gitattributes": GITATTRIBUTES}, [], token)
        return True

    def resolve(self, meta: dict, revision: str, repo_id: str) -> str:
        """A branch or a commit sha -> the commit sha."""
        if revision in meta["branches"]:
            return meta["branches"][revision]
        if revision in meta["commits"]:
            return revision
        raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision} for {repo_id}")

    def tree(self, kind: str, repo_id: str, sha: str) -> Path:
        return self.folder(kind, repo_id) / "commits" / sha

    def files(self, kind: str, repo_id: str, sha: str) -> dict[str, Path]:
        top = self.tree(kind, repo_id, sha)
        return {p.relative_to(top).as_posix(): p for p in sorted(top.rglob("*")) if p.is_file()}

    def commit(self, kind: str, repo_id: str, branch: str, message: str, added: dict[str, bytes],
               deleted: list[str], token: str | None) -> str:
        """A new commit on ``branch`` (created from nothing for the first commit): the parent's tree, ``deleted``
        paths (files or folders) removed, ``added`` files written."""
        with self.lock:
            meta = json.loads((self.folder(kind, repo_id) / "repo.json").read_text())
            parent = meta["branches"].get(branch)
            if parent is None and meta["branches"]:
                raise HubError(404, "RevisionNotFound", f"Invalid rev id: {branch}")
            sha = hashlib.sha1(f"{repo_id} {branch} {parent} {uuid.uuid4()}".encode()).hexdigest()
            tree = self.tree(kind, repo_id, sha)
            if parent is not None:
                shutil.copytree(self.tree(kind, repo_id, parent), tree)
            tree.mkdir(parents=True, exist_ok=True)
            for path in deleted:
                target = tree / path
                shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
            for path, data in added.items():
                (tree / path).parent.mkdir(parents=True, exist_ok=True)
                (tree / path).write_bytes(data)
            meta["commits"][sha] = {"parent": parent, "message": message, "time": time.time()}
            meta["branches"][branch] = sha
            self.save(kind, repo_id, meta)
        return sha


class Handler(BaseHTTPRequestHandler):
    server: StandinServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass

    # ------------------------------------------------------------------ plumbing
    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth.removeprefix("Bearer ").strip() or None

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, content_type="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value, status: int = 200, headers: dict | None = None) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _route(self) -> None:
        url = urlsplit(self.path)
        self.server.requests.append((self.command, url.path, self._token()))
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        try:
            routed = self._api(parts, parse_qs(url.query)) if parts[0] == "api" else self._resolve(parts)
            if not routed:
                self._json({"error": f"the stand-in has no route for {self.command} {url.path}"}, 404)
        except HubError as exc:
            headers = {"X-Error-Code": exc.code} if exc.code else {}
            self._json({"error": str(exc)}, exc.status, {**headers, "X-Error-Message": str(exc)})

    do_GET = do_POST = do_HEAD = _route

    # ------------------------------------------------------------------ /api/...
    def _api(self, parts: list[str], query: dict) -> bool:
        if parts[1:] == ["repos", "create"]:
            return self._create_repo()
        if parts[1:] == ["validate-yaml"]:
            self._body()
            self._json({"errors": [], "warnings": []})
            return True
        if len(parts) < 4 or parts[1] not in ("models", "datasets"):
            return False
        kind, repo_id, rest = parts[1][:-1], f"{parts[2]}/{parts[3]}", parts[4:]
        if self.command == "GET" and (not rest or rest[0] == "revision"):
            return self._info(kind, repo_id, rest[1] if len(rest) > 1 else "main")
        if self.command == "GET" and rest[:1] == ["tree"] and len(rest) >= 2:
            return self._tree(kind, repo_id, rest[1], "/".join(rest[2:]), query)
        if self.command == "POST" and len(rest) == 2 and rest[0] in ("preupload", "commit", "branch"):
            return {"preupload": self._preupload, "commit": self._commit, "branch": self._branch}[rest[0]](
                kind, repo_id, rest[1])
        return False

    def _writer(self) -> str:
        token = self._token()
        if token is None:
            raise HubError(401, None, "Invalid credentials in Authorization header")
        return token

    def _owned(self, kind: str, repo_id: str) -> dict:
        token = self._writer()
        meta = self.server.repos.meta(kind, repo_id, token)
        if meta["token"] != token:
            raise HubError(403, None, f"You don't have the rights to write to {repo_id}")
        return meta

    def _create_repo(self) -> bool:
        token = self._writer()
        payload = json.loads(self._body() or b"{}")
        kind = payload.get("type") or "model"
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        private = bool(payload.get("private")) or payload.get("visibility") == "private"
        prefix = "" if kind == "model" else f"{kind}s/"
        answer = {"url": f"{self.server.url}/{prefix}{repo_id}", "name": repo_id}
        if not self.server.repos.create(kind, repo_id, private, token):  # the Hub's 409 names the repo too
            self._json({**answer, "error": "You already created this repo"}, 409)
            return True
        self._json({**answer, "id": uuid.uuid4().hex})
        return True

    def _info(self, kind: str, repo_id: str, revision: str) -> bool:
        repos = self.server.repos
        meta = repos.meta(kind, repo_id, self._token())
        sha = repos.resolve(meta, revision, repo_id)
        files = repos.files(kind, repo_id, sha)
        self._json({"id": repo_id, "_id": uuid.uuid4().hex[:24], "sha": sha, "private": meta["private"],
                    "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [],
                    "lastModified": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                    "siblings": [{"rfilename": name} for name in files]})
        return True

    def _tree(self, kind: str, repo_id: str, revision: str, under: str, query: dict) -> bool:
        repos = self.server.repos
        sha = repos.resolve(repos.meta(kind, repo_id, self._token()), revision, repo_id)
        recursive = query.get("recursive", ["false"])[0].lower() == "true"
        entries, folders = [], set()
        for name, path in repos.files(kind, repo_id, sha).items():
            if under and not name.startswith(under.rstrip("/") + "/"):
                continue
            inner = name[len(under.rstrip("/")) + 1:] if under else name
            if not recursive and "/" in inner:
                folders.add(name[: len(name) - len(inner)] + inner.split("/")[0])
                continue
            data = path.read_bytes()
            entries.append({"type": "file", "oid": git_oid(data), "size": len(data), "path": name})
        entries += [{"type": "directory", "oid": git_oid(f.encode()), "size": 0, "path": f} for f in sorted(folders)]
        self._json(entries)
        return True

    def _preupload(self, kind: str, repo_id: str, revision: str) -> bool:
        self._owned(kind, repo_id)
        payload = json.loads(self._body())
        self._json({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                              for f in payload["files"]]})
        return True

    def _commit(self, kind: str, repo_id: str, revision: str) -> bool:
        self._owned(kind, repo_id)
        added: dict[str, bytes] = {}
        deleted: list[str] = []
        message = ""
        for line in self._body().splitlines():
            item = json.loads(line)
            value = item["value"]
            if item["key"] == "header":
                message = value.get("summary", "")
            elif item["key"] == "file":
                added[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] in ("deletedFile", "deletedFolder"):
                deleted.append(value["path"])
            else:
                raise HubError(400, None, f"the stand-in takes regular files only, not {item['key']}")
        sha = self.server.repos.commit(kind, repo_id, revision, message, added, deleted, self._token())
        prefix = "" if kind == "model" else f"{kind}s/"
        self._json({"commitUrl": f"{self.server.url}/{prefix}{repo_id}/commit/{sha}", "commitOid": sha,
                    "success": True})
        return True

    def _branch(self, kind: str, repo_id: str, branch: str) -> bool:
        meta = self._owned(kind, repo_id)
        payload = json.loads(self._body() or b"{}")
        if branch in meta["branches"]:
            raise HubError(409, None, f"Reference already exists: refs/heads/{branch}")
        start = self.server.repos.resolve(meta, payload.get("startingPoint") or "main", repo_id)
        meta["branches"][branch] = start
        self.server.repos.save(kind, repo_id, meta)
        self._json({})
        return True

    # ------------------------------------------------------------------ /<org>/<name>/resolve/<rev>/<path>
    def _resolve(self, parts: list[str]) -> bool:
        kind = "model"
        if parts[0] in ("datasets", "models"):
            kind, parts = parts[0][:-1], parts[1:]
        if len(parts) < 5 or parts[2] != "resolve" or self.command not in ("GET", "HEAD"):
            return False
        repo_id, revision, name = f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])
        repos = self.server.repos
        sha = repos.resolve(repos.meta(kind, repo_id, self._token()), revision, repo_id)
        path = repos.files(kind, repo_id, sha).get(name)
        if path is None:
            raise HubError(404, "EntryNotFound", f"{name} does not exist at {revision}")
        data = path.read_bytes()
        self._send(200, data, {"ETag": f'"{git_oid(data)}"', "X-Repo-Commit": sha}, "application/octet-stream")
        return True


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.repos = Repos(root)
        self.requests: list[tuple[str, str, str | None]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class HubStandin:
    """The stand-in, started in a thread (``with HubStandin(folder) as hub``)."""

    def __init__(self, root: Path) -> None:
        Path(root).mkdir(parents=True, exist_ok=True)
        self.server = StandinServer(Path(root))
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HubStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[tuple[str, str, str | None]]:
        return self.server.requests

    def env(self, hf_home: Path, **extra: str) -> dict[str, str]:
        """The environment that points a huggingface_hub client in a subprocess here, with its own cache."""
        return {"HF_ENDPOINT": self.url, "HF_HOME": str(hf_home), "HF_HUB_DISABLE_TELEMETRY": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1", "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost", **extra}

    def add_files(self, kind: str, repo_id: str, files: dict[str, bytes], branch: str = "main",
                  token: str = "standin-token", private: bool = False) -> str:
        """Create the repo if needed and commit ``files`` to ``branch`` directly (no client): returns the commit."""
        repos = self.server.repos
        repos.create(kind, repo_id, private, token)
        meta = json.loads((repos.folder(kind, repo_id) / "repo.json").read_text())
        if branch not in meta["branches"]:
            meta["branches"][branch] = meta["branches"]["main"]
            repos.save(kind, repo_id, meta)
        return repos.commit(kind, repo_id, branch, f"add {len(files)} files", files, [], token)
