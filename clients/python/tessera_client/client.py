"""The client's objects: Client, its sessions, folders and images."""
import codecs
import datetime
import hashlib
import io
import os
import time

from . import config as _config
from .errors import TesseraError, WaitTimeout
from .frames import ERROR, EXIT, STDERR, STDOUT, FrameDecoder, FrameError
from .transport import DEFAULT, Transport, quote

WAITING = ("PENDING", "SCHEDULED", "PREPARING")
ENDED = ("TERMINATED", "ERROR", "CANCELLED")


class Client:
    """A connection to a Tessera manager, signed with one API key.

    ``Client()`` reads the configuration the ``tessera`` command line
    reads: the file ``TESSERA_CONFIG`` names, else
    ``~/.config/tessera/client.conf``, then ``TESSERA_ENDPOINT``,
    ``TESSERA_ACCESS_KEY`` and ``TESSERA_SECRET_KEY``. ``config=PATH``
    reads that file instead (``config=False``: none); ``endpoint``,
    ``access_key`` and ``secret_key`` override what was read. ``timeout``
    is how long a call waits for an answer, in seconds (waits, logs and
    execs take longer on their own terms).
    """

    def __init__(self, config=None, endpoint=None, access_key=None, secret_key=None, timeout=60.0):
        self.config = _config.load(config, endpoint, access_key, secret_key)
        self.transport = Transport(self.config, timeout)
        self.sessions = Sessions(self)
        self.folders = Folders(self)
        self.images = Images(self)

    def __repr__(self):
        return "Client(endpoint=%r, access_key=%r)" % (self.config.endpoint, self.config.access_key)

    def request(self, method, path, params=None, body=None, timeout=None):
        """Any route of the API (docs/api.md), signed: ``path`` as
        ``/v1/...``, ``params`` the query (a dict), ``body`` a JSON-able
        object. Returns the answer's JSON."""
        return self.transport.call(method, path, params, body, DEFAULT if timeout is None else timeout)

    def whoami(self):
        """The user this client's key belongs to (``GET /v1/auth/whoami``)."""
        return self.request("GET", "/v1/auth/whoami")["user"]

    def resources(self):
        """What you use against your policy and what the cluster has free
        (``GET /v1/resources``)."""
        return self.request("GET", "/v1/resources")

    def usage_summary(self, since=None, until=None, by=None, user=None, project=None):
        """Allocated CPU-, memory-GiB- and fGPU-hours and sessions started,
        per UTC day and per user (``by="project"``: per project), as ``GET
        /v1/usage/summary`` answers it: ``{"from", "to", "by", "rows",
        "totals"}``. ``since``/``until``: dates (``datetime.date`` or
        ``"YYYY-MM-DD"``, both days included; the manager's defaults
        otherwise); ``user``/``project`` filter (another user's: admins
        only)."""
        def day(d):
            return d.isoformat() if isinstance(d, datetime.date) else d
        params = {"from": day(since), "to": day(until), "by": by, "user": user, "project": project}
        return self.request("GET", "/v1/usage/summary", params)


def _rfc3339(when):
    """A start time for the API: an aware datetime as UTC with ``Z``; a
    string as it is (the manager checks it); None as None. A naive
    datetime is refused: its zone would be a guess."""
    if when is None or isinstance(when, str):
        return when
    if isinstance(when, datetime.datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError("starts_at: a datetime needs a time zone (e.g. datetime.timezone.utc)")
        return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + \
            "%03dZ" % (when.microsecond // 1000)
    raise TypeError("starts_at must be a datetime or an RFC 3339 string, not %s" % type(when).__name__)


def _owner(owner):
    return {"owner": owner} if owner else {}


# ---- sessions -------------------------------------------------------------

class ExecResult(tuple):
    """What ``Session.exec`` returns: a pair ``(exit_code, output)`` to
    unpack, ``output`` being stdout and stderr as one text in the order the
    command wrote them. Also ``.exit_code``, ``.output``, and ``.stdout``
    and ``.stderr`` apart, as the bytes they were."""

    def __new__(cls, exit_code, output, stdout, stderr):
        self = tuple.__new__(cls, (exit_code, output))
        self.exit_code, self.output, self.stdout, self.stderr = exit_code, output, stdout, stderr
        return self

    def __repr__(self):
        out = self.output if len(self.output) <= 200 else self.output[:200] + "..."
        return "ExecResult(exit_code=%d, output=%r)" % (self.exit_code, out)


class Session:
    """One session. ``data`` is its JSON as the API last gave it
    (docs/api.md, "Sessions"); ``s["status_info"]`` reads it too. Calls on
    it name the session by its id, so they reach this very session even
    after another of the same name is made."""

    def __init__(self, client, data):
        self._c = client
        self.data = data

    def __repr__(self):
        return "<Session %s %s %s id=%s>" % (self.name, self.status, self.data.get("image"), (self.id or "")[:8])

    def __getitem__(self, key):
        return self.data[key]

    def get(self, key, default=None):
        return self.data.get(key, default)

    id = property(lambda self: self.data.get("id"))
    name = property(lambda self: self.data.get("name"))
    status = property(lambda self: self.data.get("status"))
    status_info = property(lambda self: self.data.get("status_info"))
    exit_code = property(lambda self: self.data.get("exit_code"))

    def _path(self, tail=""):
        return "/v1/sessions/%s%s" % (quote(self.id), tail)

    def refresh(self):
        """Reads the session again; returns it."""
        self.data = self._c.request("GET", self._path())
        return self

    def info(self):
        """The session's JSON as it is now (a dict)."""
        return self.refresh().data

    def _error(self, cls, message):
        # The session rides on the exception: after create(wait=True) it
        # is the caller's only handle on a session that stays queued.
        e = cls(message)
        e.session = self
        return e

    def wait(self, timeout=300):
        """Waits until the session is RUNNING (a batch session: until it has
        ended, however it ended; check ``exit_code``). Returns it.

        Raises TesseraError when it ends or fails instead of running (its
        ``status_info`` says why), WaitTimeout when TIMEOUT seconds pass
        first: the session stays queued and starts by itself when it can.
        Either exception's ``session`` is this Session."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.status
            batch = self.data.get("type") == "batch"
            if (st in ENDED) if batch else (st == "RUNNING"):
                return self
            if not batch and st not in WAITING:
                raise self._error(TesseraError, "session %s is %s: %s" % (
                    self.name, st, self.status_info or "no details"))
            left = deadline - time.monotonic()
            if left <= 0:
                if st == "PENDING":
                    raise self._error(WaitTimeout, "session %s is still PENDING after %g s: %s; it stays queued "
                                      "and starts by itself when it can (or remove it)" % (
                                          self.name, timeout, self.status_info or "no details"))
                raise self._error(WaitTimeout, "session %s is still %s after %g s: %s" % (
                    self.name, st, timeout, self.status_info or "no details"))
            # The manager holds the call until the status changes (at most
            # the slice); a new call each slice keeps every call short.
            piece = max(1, min(30, int(left)))
            asked = time.monotonic()
            self.data = self._c.request("GET", self._path(), {"wait": 1, "timeout_s": piece}, timeout=piece + 15)
            # A manager that answers at once without waiting must not turn
            # this into a busy loop.
            if time.monotonic() - asked < 0.5 and (batch or self.status in WAITING):
                time.sleep(0.5)

    def logs(self, tail=None, container=None):
        """The session's output so far (stdout and stderr as written), as
        text; ``tail=N``: its last N lines only."""
        raw = b"".join(self._c.transport.stream(
            "GET", self._path("/logs"), {"tail": tail, "container": container}))
        return raw.decode("utf-8", errors="replace")

    def follow_logs(self, tail=None, container=None):
        """The session's output line by line as it writes it, until the
        session ends or is removed (an iterator of strings, each with its
        newline; the last one may lack it)."""
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        # No read timeout: a quiet session writes nothing for hours.
        for chunk in self._c.transport.stream("GET", self._path("/logs"),
                                              {"tail": tail, "follow": 1, "container": container},
                                              timeout=None):
            pending += dec.decode(chunk)
            *lines, pending = pending.split("\n")
            for line in lines:
                yield line + "\n"
        pending += dec.decode(b"", final=True)
        if pending:
            yield pending

    def exec(self, command, timeout=600, on_stdout=None, on_stderr=None, check=False, container=None):
        """Runs COMMAND in the session (a list of strings; a string is run
        with ``sh -c``) as the session's user, and returns an ExecResult:
        ``code, out = s.exec([...])``.

        TIMEOUT (seconds, 1..3600) stops the command on the session's side
        (exit code 124). ``on_stdout`` / ``on_stderr`` get each piece of
        output (bytes) as it arrives, for long commands. ``check=True``
        raises TesseraError when the exit code is not 0."""
        if isinstance(command, str):
            command = ["sh", "-c", command]
        body = {"command": list(command), "timeout_s": timeout}
        dec = FrameDecoder()
        out, err, both = bytearray(), bytearray(), bytearray()
        code = None
        # The stream may be silent for as long as the command is: the read
        # timeout covers the command's own, and the manager's stop after it.
        stream = self._c.transport.stream("POST", self._path("/exec"), {"container": container}, body,
                                          timeout=timeout + 60, accept="application/vnd.tessera.frames")
        with stream:
            for chunk in stream:
                try:
                    frames = dec.feed(chunk)
                except FrameError as e:
                    raise TesseraError("exec in session %s: %s" % (self.name, e)) from None
                for ftype, payload in frames:
                    if ftype == STDOUT:
                        out += payload
                        both += payload
                        if on_stdout:
                            on_stdout(payload)
                    elif ftype == STDERR:
                        err += payload
                        both += payload
                        if on_stderr:
                            on_stderr(payload)
                    elif ftype == EXIT:
                        code = FrameDecoder.exit_code(payload)
                    elif ftype == ERROR:
                        raise TesseraError("exec in session %s: %s" % (
                            self.name, payload.decode("utf-8", errors="replace")))
                if dec.ended:
                    break
        if code is None:
            raise TesseraError("exec in session %s: the output stream was cut short before the command's "
                               "exit code came" % self.name)
        result = ExecResult(code, both.decode("utf-8", errors="replace"), bytes(out), bytes(err))
        if check and code != 0:
            raise TesseraError("command %r exited with code %d in session %s: %s" % (
                command, code, self.name, result.output[-500:]))
        return result

    def apps(self, container=None):
        """The session's apps: ``[{"name", "protocol", "port", "url"?}]``,
        ``terminal`` first, then those its image declares."""
        return self._c.request("GET", self._path("/apps"), {"container": container})["apps"]

    def app_link(self, app, container=None):
        """A link that opens APP (a name from ``apps()``, or a port number the
        session's programs listen on) in a browser: for you only, once,
        within 60 seconds. Returns the URL."""
        return self.open_app(app, container)["url"]

    def open_app(self, app, container=None):
        """As app_link, the whole answer: ``{"app", "url", "expires_in"}``."""
        return self._c.request("POST", self._path("/apps/%s" % quote(app)), {"container": container})

    def stats(self, since=None, container=None):
        """Live usage: ``{"current": <sample or None>, "history": [...],
        "period_ms", ...}`` (docs/api.md, "Usage statistics"); ``since``
        (Unix milliseconds) keeps only the history after it."""
        return self._c.request("GET", self._path("/stats"), {"since": since, "container": container})

    def remove(self, wait=False, timeout=60):
        """Ends the session (a waiting one is cancelled); an ended one's
        container, kept for its logs, is removed. ``wait=True`` returns once
        it has ended."""
        self.data = self._c.request("DELETE", self._path())
        deadline = time.monotonic() + timeout
        while wait and self.status not in ENDED:
            if time.monotonic() >= deadline:
                raise WaitTimeout("session %s is still %s after %g s" % (self.name, self.status, timeout))
            time.sleep(0.2)
            self.refresh()
        return self


class Sessions:
    """``client.sessions``: create, list and find sessions."""

    def __init__(self, client):
        self._c = client

    def _body(self, image, cpu, mem, fgpu, name, env, startup_command, batch, mounts, project, group,
              priority, preemptible, root, cluster_size, cluster_mode, starts_at=None, batch_timeout=None,
              preopen_ports=None):
        body = {"image": image}
        res = {k: v for k, v in (("cpu", cpu), ("mem", mem), ("fgpu", fgpu)) if v is not None}
        if res:
            body["resources"] = res
        for k, v in (("name", name), ("env", env), ("startup_command", startup_command),
                     ("mounts", None if mounts is None else list(mounts)), ("project", project),
                     ("group", group), ("priority", priority), ("preemptible", preemptible),
                     ("root", root), ("cluster_size", cluster_size), ("cluster_mode", cluster_mode),
                     ("starts_at", _rfc3339(starts_at)), ("batch_timeout", batch_timeout),
                     ("preopen_ports", None if preopen_ports is None else list(preopen_ports))):
            if v is not None:
                body[k] = v
        if batch:
            body["type"] = "batch"
        return body

    def create(self, image, cpu=None, mem=None, fgpu=None, name=None, env=None, startup_command=None,
               batch=False, mounts=None, project=None, group=None, priority=None, preemptible=None,
               root=None, cluster_size=None, cluster_mode=None, starts_at=None, batch_timeout=None,
               preopen_ports=None, wait=False, timeout=300):
        """Creates a session of IMAGE and returns it (a Session).

        ``cpu`` (cores, e.g. 0.5), ``mem`` (bytes or ``"512m"``, ``"2g"``)
        and ``fgpu`` (fractional GPUs) default to the manager's (1 CPU,
        256 MiB, no GPU). ``env`` a dict, ``startup_command`` run with
        ``sh -c`` after start, ``batch=True`` a session that ends with its
        startup command, ``mounts`` ``["NAME[:PATH][:ro]", ...]`` data
        folders; ``project``, ``group``, ``priority``, ``preemptible``,
        ``root``, ``cluster_size`` and ``cluster_mode`` as in docs/api.md.
        ``starts_at`` (an aware ``datetime`` or an RFC 3339 string) keeps
        it waiting until then; ``batch_timeout`` (seconds, batch only)
        ends it as ERROR once it ran that long; ``preopen_ports`` (up to 8
        ports) lists them among its apps as ``port-N``.
        ``wait=True`` returns once it runs (see ``Session.wait``; TIMEOUT
        seconds at most)."""
        body = self._body(image, cpu, mem, fgpu, name, env, startup_command, batch, mounts, project, group,
                          priority, preemptible, root, cluster_size, cluster_mode, starts_at, batch_timeout,
                          preopen_ports)
        s = Session(self._c, self._c.request("POST", "/v1/sessions", body=body)["sessions"][0])
        return s.wait(timeout) if wait else s

    def create_many(self, image, count, wait=False, timeout=300, **options):
        """COUNT sessions alike (named NAME-1 .. NAME-COUNT with
        ``name=NAME``), as a list; options as for ``create``."""
        allowed = ("cpu", "mem", "fgpu", "name", "env", "startup_command", "batch", "mounts", "project",
                   "group", "priority", "preemptible", "root", "cluster_size", "cluster_mode", "starts_at",
                   "batch_timeout", "preopen_ports")
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise TypeError("create_many() got unknown options: %s" % ", ".join(unknown))
        body = self._body(image, **{k: options.get(k) for k in allowed})
        body["count"] = count
        sessions = [Session(self._c, d) for d in self._c.request("POST", "/v1/sessions", body=body)["sessions"]]
        if wait:
            deadline = time.monotonic() + timeout
            for s in sessions:
                s.wait(max(1, deadline - time.monotonic()))
        return sessions

    def list(self, all=False, status=None, owner=None, project=None):
        """Your sessions (an admin's: everyone's) as Session objects, oldest
        first; without ``all=True`` only those not ended. ``status`` a
        status or a list of them; ``owner`` an email, ``project`` a name."""
        if status is not None and not isinstance(status, str):
            status = ",".join(status)
        params = {"all": 1 if all else None, "status": status, "owner": owner, "project": project}
        return [Session(self._c, d) for d in self._c.request("GET", "/v1/sessions", params)["sessions"]]

    def get(self, ref, owner=None):
        """The session named REF (an id, or one of your sessions' names;
        with ``owner=EMAIL`` a name among that user's, for admins)."""
        return Session(self._c, self._c.request("GET", "/v1/sessions/%s" % quote(ref), _owner(owner)))

    info = get

    def wait(self, ref, timeout=300, owner=None):
        """``get(ref).wait(timeout)``."""
        return self.get(ref, owner).wait(timeout)

    def remove(self, ref, owner=None, wait=False, timeout=60):
        """Removes the session named REF (see ``Session.remove``)."""
        s = Session(self._c, self._c.request("DELETE", "/v1/sessions/%s" % quote(ref), _owner(owner)))
        if wait:
            deadline = time.monotonic() + timeout
            while s.status not in ENDED:
                if time.monotonic() >= deadline:
                    raise WaitTimeout("session %s is still %s after %g s" % (s.name, s.status, timeout))
                time.sleep(0.2)
                s.refresh()
        return s

    def __iter__(self):
        return iter(self.list())


# ---- folders ----------------------------------------------------------------

class Folder:
    """One data folder (docs/folders.md). ``data`` is its JSON as the API
    last gave it. Paths inside it are relative to its root (``"a/b.txt"``).
    A progress callback is called as ``progress(done_bytes, total_bytes)``
    after each piece sent or received (``total_bytes`` None when unknown)."""

    def __init__(self, client, data):
        self._c = client
        self.data = data

    def __repr__(self):
        return "<Folder %s owner=%s usage=%s>" % (self.name, self.data.get("owner"), self.data.get("usage_bytes"))

    def __getitem__(self, key):
        return self.data[key]

    id = property(lambda self: self.data.get("id"))
    name = property(lambda self: self.data.get("name"))

    def _path(self, tail=""):
        return "/v1/folders/%s%s" % (quote(self.name), tail)

    def refresh(self):
        self.data = self._c.request("GET", self._path())
        return self

    def update(self, name=None, quota=None):
        """Renames it and/or changes its quota (bytes or ``"20g"``; 0: none)."""
        body = {k: v for k, v in (("name", name), ("quota", quota)) if v is not None}
        self.data = self._c.request("PATCH", self._path(), body=body)
        return self

    def share(self, email, permission="ro"):
        self.data = self._c.request("POST", self._path("/shares"), body={"email": email, "permission": permission})
        return self

    def unshare(self, email):
        self.data = self._c.request("DELETE", self._path("/shares/%s" % quote(email)))
        return self

    def remove(self, force=False):
        """Moves it to the trash (``force=True`` while sessions mount it)."""
        self._c.request("DELETE", self._path(), {"force": 1 if force else None})

    def files(self, path=""):
        """The entries of directory PATH (default the root):
        ``[{"name", "type", "size", "mtime", "mode"}]``, sorted by name."""
        return self._c.request("GET", self._path("/files"), {"path": path or None})["entries"]

    def mkdir(self, path, parents=False):
        return self._c.request("POST", self._path("/mkdir"), body={"path": path, "parents": parents})

    def move(self, src, dst, overwrite=False):
        return self._c.request("POST", self._path("/mv"), body={"from": src, "to": dst, "overwrite": overwrite})

    def delete(self, path, recursive=False):
        """Removes a file, a link or an empty directory (``recursive=True``:
        a directory and all it holds)."""
        return self._c.request("DELETE", self._path("/files"), {"path": path, "recursive": 1 if recursive else None})

    def upload(self, source, path=None, overwrite=False, progress=None):
        """Uploads SOURCE, a local file's path, bytes, or a binary file
        object that can seek, to PATH in the folder (default: the local
        file's name). Its directory must exist; an existing file is
        replaced only with ``overwrite=True``. Nothing is kept unless it all
        arrives intact. Returns ``{"path", "size", "sha256"}``."""
        close = None
        if isinstance(source, (str, os.PathLike)):
            local = os.fspath(source)
            if path is None:
                path = os.path.basename(local)
            if os.path.isdir(local):
                raise ValueError("%s is a directory: upload files one by one" % local)
            source = close = open(local, "rb")
        elif isinstance(source, (bytes, bytearray, memoryview)):
            source = io.BytesIO(bytes(source))
        if path is None:
            raise ValueError("upload() needs path= for data that is not a local file")
        try:
            if not (hasattr(source, "read") and source.seekable()):
                raise ValueError("upload() takes a path, bytes, or a binary file object that can seek")
            # The signature covers the body's hash, so the bytes are read
            # twice: once to hash them, once to send them.
            start = source.tell()
            h, length = hashlib.sha256(), 0
            while True:
                piece = source.read(1 << 20)
                if not piece:
                    break
                if not isinstance(piece, bytes):
                    raise ValueError("upload() needs a file opened in binary mode ('rb')")
                h.update(piece)
                length += len(piece)
            source.seek(start)
            return self._c.transport.upload(self._path("/upload"), {"path": path, "overwrite": 1 if overwrite else None},
                                            source, length, h.hexdigest(), progress, timeout=300)
        finally:
            if close:
                close.close()

    def download(self, path, dest=None, progress=None):
        """Downloads the file PATH of the folder. DEST: None returns its
        bytes; a local path (a directory, or a name ending in "/", made
        if missing: the file's name in it) writes it there, whole or not
        at all, and returns that path; a writable binary
        file object gets the bytes and is returned."""
        stream = self._c.transport.stream("GET", self._path("/download"), {"path": path},
                                          timeout=300, accept="application/octet-stream")
        total, done = stream.length, 0
        target = tmp = None
        if dest is None:
            out = io.BytesIO()
        elif isinstance(dest, (str, os.PathLike)):
            target = os.fspath(dest)
            # A directory, or a name ending in "/" (made if missing): the
            # file's own name in it.
            if target.endswith(("/", os.sep)):
                os.makedirs(target, exist_ok=True)
            if os.path.isdir(target):
                target = os.path.join(target, path.rstrip("/").rsplit("/", 1)[-1])
            # Written beside, then renamed: a download cut short leaves no
            # half file under the name.
            tmp = target + ".part"
            out = open(tmp, "wb")
        else:
            out = dest
        try:
            if progress:
                progress(0, total)
            for chunk in stream:
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
        except BaseException:
            if tmp:
                out.close()
                os.unlink(tmp)
            raise
        if dest is None:
            return out.getvalue()
        if tmp:
            out.close()
            os.replace(tmp, target)
            return target
        return dest


class Folders:
    """``client.folders``: create, list and find data folders."""

    def __init__(self, client):
        self._c = client

    def create(self, name, host=None, quota=None):
        """A new folder NAME on storage HOST (default the first), with a
        quota (bytes or ``"10g"``; default the policy's)."""
        body = {k: v for k, v in (("name", name), ("host", host), ("quota", quota)) if v is not None}
        return Folder(self._c, self._c.request("POST", "/v1/folders", body=body))

    def list(self, trash=False, all=False):
        """Your folders and those shared with you (``trash=True``: your
        trashed ones; ``all=True``, admins: everyone's)."""
        params = {"trash": 1 if trash else None, "all": 1 if all else None}
        return [Folder(self._c, d) for d in self._c.request("GET", "/v1/folders", params)["folders"]]

    def get(self, name):
        return Folder(self._c, self._c.request("GET", "/v1/folders/%s" % quote(name)))

    def remove(self, name, force=False):
        self._c.request("DELETE", "/v1/folders/%s" % quote(name), {"force": 1 if force else None})

    def restore(self, name):
        return Folder(self._c, self._c.request("POST", "/v1/folders/%s/restore" % quote(name)))

    def __iter__(self):
        return iter(self.list())


# ---- images -----------------------------------------------------------------

class Images:
    """``client.images``: the image catalog."""

    def __init__(self, client):
        self._c = client

    def list(self, all=False):
        """The images you may launch, one dict per reference (``ref`` is
        what ``sessions.create`` takes)."""
        return self._c.request("GET", "/v1/images", {"all": 1 if all else None})["images"]

    def aliases(self):
        """``{"alias": "image ref"}``."""
        return self._c.request("GET", "/v1/images/aliases")["aliases"]

    def __iter__(self):
        return iter(self.list())
