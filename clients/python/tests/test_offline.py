"""The client's parts that need no server: signing against known answers,
the configuration file and its order, endpoints, the exec stream decoder.

Run: python3 -m unittest discover -s clients/python/tests
"""
import http.server
import json
import os
import struct
import tempfile
import threading
import time
import unittest

import tessera_client
from tessera_client import config as cfgmod
from tessera_client.frames import FrameDecoder, FrameError
from tessera_client.transport import Transport, authorization, http_date, query_string, signature

# The known-answer vectors of tests/common/test_sign.c, computed there with
# the openssl command line, so the two signers are held to the same answers.
DATE = "Sun, 22 Nov 2026 08:40:00 GMT"
HOST = "127.0.0.1:8090"
BODY_SHA = "ae2690ffaf7c3254793a5ce8a566b7dd320298a3a5581031a0c417661749fdd2"   # of {"image":"x"}
EMPTY_SHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
KAT_POST = "93672900864c700c73a193f7db129ea20de96dad43d6214bbb29c04fb3a7e89f"
KAT_GET = "7043869fba019a13423d56ea7436a9d715da7b881f5195e68b44c9dcd6acd35e"


class Signing(unittest.TestCase):
    def test_known_answers(self):
        self.assertEqual(signature("s3cr3t", "POST", "/v1/sessions", DATE, HOST, BODY_SHA), KAT_POST)
        self.assertEqual(signature("s3cr3t", "GET", "/v1/sessions?all=1", DATE, HOST, EMPTY_SHA), KAT_GET)
        # The method is upper-cased before signing, as the manager does.
        self.assertEqual(signature("s3cr3t", "get", "/v1/sessions?all=1", DATE, HOST, EMPTY_SHA), KAT_GET)
        self.assertEqual(authorization("AK", "s3cr3t", "POST", "/v1/sessions", DATE, HOST, BODY_SHA),
                         "TESSERA-HMAC-SHA256 Credential=AK, Signature=" + KAT_POST)

    def test_another_secret_or_date_signs_otherwise(self):
        self.assertNotEqual(signature("other", "POST", "/v1/sessions", DATE, HOST, BODY_SHA), KAT_POST)
        self.assertNotEqual(signature("s3cr3t", "POST", "/v1/sessions", "Mon, 23 Nov 2026 08:40:00 GMT",
                                      HOST, BODY_SHA), KAT_POST)

    def test_dates(self):
        self.assertEqual(http_date(1795336800), DATE)
        self.assertEqual(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT")
        with self.assertRaises(ValueError):
            signature("s3cr3t", "GET", "/", "yesterday", HOST, EMPTY_SHA)

    def test_bad_access_key(self):
        for ak in ("", "A K", "A,K"):
            with self.assertRaises(tessera_client.ConfigError):
                authorization(ak, "s", "GET", "/", DATE, HOST, EMPTY_SHA)

    def test_query_string(self):
        self.assertEqual(query_string({"a": None, "b": True, "c": False, "path": "x y/é"}),
                         "?b=1&c=0&path=x%20y%2F%C3%A9")
        self.assertEqual(query_string({"a": None}), "")


class ConfigFile(unittest.TestCase):
    def test_grammar(self):
        text = ('# comment\n\n  endpoint = http://127.0.0.1:8090  \naccess_key=TK1\n'
                'secret_key = "a \\"quoted\\" \\\\ value"\r\nweb_url = http://x/\n')
        c = cfgmod.parse_conf(text)
        self.assertEqual(c["endpoint"], "http://127.0.0.1:8090")
        self.assertEqual(c["access_key"], "TK1")
        self.assertEqual(c["secret_key"], 'a "quoted" \\ value')

    def test_errors_name_the_line(self):
        cases = {"a = 1\na = 2\n": "line 2: duplicate key 'a' (first set on line 1)",
                 "x\n": "line 1: expected 'key = value'",
                 "Endpoint = x\n": "line 1: invalid key 'Endpoint'",
                 'a = "open\n': "line 1: unterminated quoted value",
                 'a = "x" y\n': "line 1: text after the closing quote"}
        for text, want in cases.items():
            with self.assertRaises(ValueError) as e:
                cfgmod.parse_conf(text)
            self.assertIn(want, str(e.exception))


class ConfigOrder(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "admin.conf")
        with open(self.path, "w") as f:
            f.write("endpoint = http://127.0.0.1:1\naccess_key = TKFILE\nsecret_key = sfile\n")

    def tearDown(self):
        self.dir.cleanup()

    def test_tessera_config_then_environment_then_arguments(self):
        env = {"TESSERA_CONFIG": self.path}
        c = cfgmod.load(environ=env)
        self.assertEqual((c.endpoint, c.access_key, c.secret_key, c.file),
                         ("http://127.0.0.1:1", "TKFILE", "sfile", self.path))
        env["TESSERA_ACCESS_KEY"] = "TKENV"
        env["TESSERA_SECRET_KEY"] = ""       # empty: not set, as for the CLI
        c = cfgmod.load(environ=env)
        self.assertEqual((c.access_key, c.secret_key), ("TKENV", "sfile"))
        c = cfgmod.load(endpoint="http://h:2", access_key="TKARG", environ=env)
        self.assertEqual((c.endpoint, c.access_key), ("http://h:2", "TKARG"))
        self.assertNotIn("sfile", repr(c))

    def test_client_conf_in_home(self):
        home = os.path.join(self.dir.name, "home")
        os.makedirs(os.path.join(home, ".config", "tessera"))
        with open(os.path.join(home, ".config", "tessera", "client.conf"), "w") as f:
            f.write("endpoint = http://127.0.0.1:3\naccess_key = TKHOME\nsecret_key = shome\n")
        c = cfgmod.load(environ={"HOME": home})
        self.assertEqual(c.access_key, "TKHOME")
        # TESSERA_CONFIG wins over client.conf; config= over both.
        self.assertEqual(cfgmod.load(environ={"HOME": home, "TESSERA_CONFIG": self.path}).access_key, "TKFILE")
        self.assertEqual(cfgmod.load(config=self.path, environ={"HOME": home}).access_key, "TKFILE")

    def test_missing_pieces_are_said(self):
        with self.assertRaises(tessera_client.ConfigError) as e:
            cfgmod.load(environ={"TESSERA_CONFIG": self.path + ".nope"})
        self.assertTrue(str(e.exception).startswith("TESSERA_CONFIG: cannot read " + self.path + ".nope"))
        with self.assertRaises(tessera_client.ConfigError) as e:
            cfgmod.load(environ={"HOME": self.dir.name})
        self.assertIn("no endpoint configured", str(e.exception))
        with self.assertRaises(tessera_client.ConfigError) as e:
            cfgmod.load(environ={"TESSERA_ENDPOINT": "http://x:1", "TESSERA_ACCESS_KEY": "TK"})
        self.assertIn("no secret_key in the environment", str(e.exception))
        bad = os.path.join(self.dir.name, "bad.conf")
        with open(bad, "w") as f:
            f.write("endpoint = x\nendpoint = y\n")
        with self.assertRaises(tessera_client.ConfigError) as e:
            cfgmod.load(config=bad, environ={})
        self.assertIn("bad.conf: line 2: duplicate key", str(e.exception))


class Endpoints(unittest.TestCase):
    def conf(self, ep):
        return cfgmod.Config(ep, "TK", "s")

    def test_host_and_prefix(self):
        t = Transport(self.conf("http://127.0.0.1:8090"))
        self.assertEqual((t.host, t.prefix, t.target("/v1/x", {"a": 1})), ("127.0.0.1:8090", "", "/v1/x?a=1"))
        t = Transport(self.conf("https://api.example.org/tessera/"))
        self.assertEqual((t.host, t.prefix, t.https), ("api.example.org", "/tessera", True))
        self.assertEqual(t.target("/v1/sessions"), "/tessera/v1/sessions")

    def test_bad_endpoints(self):
        for ep in ("127.0.0.1:8090", "ftp://h:1", "http://", "http://h:port"):
            with self.assertRaises(tessera_client.ConfigError, msg=ep):
                Transport(self.conf(ep))


def frame(ftype, payload):
    return struct.pack(">BxxxI", ftype, len(payload)) + payload


class ExecStream(unittest.TestCase):
    def test_frames_in_any_pieces(self):
        data = frame(1, b"out\0") + frame(2, b"err") + frame(1, b"") + frame(3, struct.pack(">i", -2))
        for size in (1, 3, 8, len(data)):
            d, got = FrameDecoder(), []
            for i in range(0, len(data), size):
                got += d.feed(data[i:i + size])
            self.assertEqual(got[:3], [(1, b"out\0"), (2, b"err"), (1, b"")])
            self.assertEqual(FrameDecoder.exit_code(got[3][1]), -2)
            self.assertTrue(d.ended)

    def test_error_frame_ends(self):
        d = FrameDecoder()
        self.assertEqual(d.feed(frame(4, b"container went away")), [(4, b"container went away")])
        self.assertTrue(d.ended)

    def test_not_frames(self):
        for junk in (b"<html><body>502 Bad Gateway</body></html>", frame(3, b"12345678"),
                     struct.pack(">BxxxI", 1, 1 << 30)):
            with self.assertRaises(FrameError):
                FrameDecoder().feed(junk)

    def test_exec_result_unpacks(self):
        r = tessera_client.ExecResult(3, "a\nb", b"a\n", b"b")
        code, out = r
        self.assertEqual((code, out, r.exit_code, r.stdout, r.stderr), (3, "a\nb", 3, b"a\n", b"b"))


class FakeManager(http.server.BaseHTTPRequestHandler):
    """Answers that a real manager does not give on purpose: a proxy's error
    page, a stream cut short."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, ctype="application/json", length=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True   # the client left first (on purpose in some tests)

    def do_GET(self):
        if self.path == "/v1/auth/whoami":
            self.send(502, b"<html>Bad Gateway</html>\n", "text/html")
        elif self.path.startswith("/v1/sessions/quiet/logs"):
            # A followed log: a line, a silence longer than the client's
            # timeout (1 s), another line, the end.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for piece in (b"first\n", b"sec", b"ond\n"):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                    if piece == b"first\n":
                        time.sleep(2)
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True   # a client that timed out
        elif self.path.startswith("/v1/sessions/"):
            sid = self.path.rsplit("/", 1)[1]
            self.send(200, json.dumps({"id": sid, "name": sid, "status": "RUNNING"}).encode())
        elif self.path.startswith("/v1/folders/f/download"):
            self.send(200, b"only part", "application/octet-stream", length=100)
            self.close_connection = True
        else:
            self.send(404, b'{"error": {"code": "not_found", "message": "no route"}}')

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/sessions/noexit/exec":
            # Output, then the end of the body without an exit frame.
            self.send(200, frame(1, b"hi"), "application/vnd.tessera.frames")
        elif self.path == "/v1/sessions/cut/exec":
            # The connection drops in the middle of a frame.
            data = frame(1, b"hello")
            self.send(200, data[:10], "application/vnd.tessera.frames", length=len(data) + 8)
            self.close_connection = True
        else:
            self.send(404, b'{"error": {"code": "not_found", "message": "no route"}}')

    def do_PUT(self):
        n = int(self.headers["Content-Length"])
        if len(self.rfile.read(n)) < n:
            self.close_connection = True   # the client gave up: no one to answer
            return
        self.send(201, json.dumps({"size": n}).encode())


class BrokenAnswers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeManager)
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()
        cls.c = tessera_client.Client(config=False, endpoint="http://127.0.0.1:%d" % cls.srv.server_address[1],
                                      access_key="TK", secret_key="s", timeout=20)

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def test_an_answer_that_is_not_ours(self):
        with self.assertRaises(tessera_client.TesseraError) as e:
            self.c.whoami()
        self.assertEqual(e.exception.status, 502)
        self.assertIn("answered HTTP 502 to GET /v1/auth/whoami: <html>Bad Gateway</html>", str(e.exception))

    def test_exec_without_an_exit_code(self):
        for sid, words in (("noexit", "cut short before the command's exit code came"), ("cut", "cut short")):
            s = self.c.sessions.get(sid)
            with self.assertRaises(tessera_client.TesseraError, msg=sid) as e:
                s.exec(["true"])
            self.assertIn(words, str(e.exception))

    def test_a_followed_log_may_be_quiet(self):
        quick = tessera_client.Client(config=False, endpoint=self.c.config.endpoint, access_key="TK",
                                      secret_key="s", timeout=1)
        s = tessera_client.Session(quick, {"id": "quiet", "name": "quiet"})
        self.assertEqual(list(s.follow_logs()), ["first\n", "second\n"])
        # An ordinary call is bounded by the client's timeout.
        with self.assertRaises(tessera_client.TesseraError) as e:
            s.logs()
        self.assertIn("no answer from the manager", str(e.exception))

    def test_download_cut_short_leaves_no_file(self):
        f = tessera_client.Folder(self.c, {"name": "f"})
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(tessera_client.TesseraError) as e:
                f.download("x.bin", d + "/")
            self.assertIn("cut short", str(e.exception))
            self.assertEqual(os.listdir(d), [])

    def test_a_progress_callback_raising_is_not_hidden(self):
        f = tessera_client.Folder(self.c, {"name": "f"})

        def stop(done, total):
            if done:
                raise KeyError("stop here")
        self.assertEqual(f.upload(b"x" * 100, "a.bin")["size"], 100)
        with self.assertRaises(KeyError):
            f.upload(b"x" * 100, "a.bin", progress=stop)


class LaunchOptions(unittest.TestCase):
    """The launcher's options go into the request body as the API names
    them; a start time is sent as UTC, and a naive one is refused."""

    def test_body(self):
        import datetime
        from tessera_client.client import Sessions
        s = Sessions(None)
        when = datetime.datetime(2026, 12, 1, 9, 30, 0, 250000, tzinfo=datetime.timezone(datetime.timedelta(hours=9)))
        body = s._body("img", None, None, None, "n", None, "python3 train.py", True, None, None, None, None,
                       None, None, None, None, starts_at=when, batch_timeout=3600, preopen_ports=(8080, 6006))
        self.assertEqual(body, {"image": "img", "name": "n", "startup_command": "python3 train.py",
                                "type": "batch", "starts_at": "2026-12-01T00:30:00.250Z",
                                "batch_timeout": 3600, "preopen_ports": [8080, 6006]})
        body = s._body("img", None, None, None, None, None, None, False, None, None, None, None, None, None,
                       None, None, starts_at="2026-12-01T00:30:00Z")
        self.assertEqual(body, {"image": "img", "starts_at": "2026-12-01T00:30:00Z"})
        with self.assertRaises(ValueError) as e:
            s._body("img", None, None, None, None, None, None, False, None, None, None, None, None, None,
                    None, None, starts_at=datetime.datetime(2026, 12, 1, 9, 30))
        self.assertIn("time zone", str(e.exception))
        with self.assertRaises(TypeError):
            s._body("img", None, None, None, None, None, None, False, None, None, None, None, None, None,
                    None, None, starts_at=1800000000)


class Backend(unittest.TestCase):
    """The in-tree build backend makes a wheel pip can install offline."""

    def test_wheel(self):
        import importlib.util
        import zipfile
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        path = os.path.join(here, "_backend", "tessera_build.py")
        if not os.path.exists(path):
            self.skipTest("not run from the source tree")
        spec = importlib.util.spec_from_file_location("tessera_build", path)
        b = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(b)
        self.assertEqual(b.get_requires_for_build_wheel(), [])
        with tempfile.TemporaryDirectory() as d:
            name = b.build_wheel(d)
            self.assertEqual(name, "tessera_client-%s-py3-none-any.whl" % tessera_client.__version__)
            with zipfile.ZipFile(os.path.join(d, name)) as z:
                names = z.namelist()
                record = z.read("tessera_client-%s.dist-info/RECORD" % tessera_client.__version__).decode()
            self.assertIn("tessera_client/client.py", names)
            self.assertFalse([n for n in names if "__pycache__" in n or n.startswith("tests/")])
            for n in names:
                self.assertIn(n + ",", record)
            sdist = b.build_sdist(d)
            self.assertTrue(os.path.exists(os.path.join(d, sdist)))


if __name__ == "__main__":
    unittest.main()
