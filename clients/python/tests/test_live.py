"""The client against a real manager: tests/e2e/test_python_client.sh starts
`tessera server`, installs the package and runs this with

    TESSERA_CONFIG=.../admin.conf   the admin's keys, as the CLI reads them
    TESSERA_TEST_IMAGE=IMAGE        a small image present on the node (busybox)

Without TESSERA_TEST_IMAGE these tests are skipped (the e2e test fails on
a skip). Every wait is for a state, with a generous bound, never a time.
"""
import http.client
import os
import socket
import tempfile
import time
import unittest
import urllib.parse

import tessera_client
from tessera_client import TesseraError

IMAGE = os.environ.get("TESSERA_TEST_IMAGE")
MIB = 1 << 20


def setUpModule():
    if not IMAGE:
        raise unittest.SkipTest("TESSERA_TEST_IMAGE is not set: no server to test against")


def eventually(fn, what, bound_s=120):
    """fn() until it returns something true (then that), at most BOUND_S."""
    end = time.monotonic() + bound_s
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("still not so after %d s: %s" % (bound_s, what))
        time.sleep(0.2)


class Live(unittest.TestCase):
    """One folder and one session that mounts it, made once; the tests run in
    name order and the last removes the session."""

    @classmethod
    def setUpClass(cls):
        cls.c = tessera_client.Client()
        cls.folder = cls.c.folders.create("pyclient-data")
        cls.s = cls.c.sessions.create(IMAGE, cpu=0.5, mem="64m", name="py-nb", env={"GREETING": "hi"},
                                      startup_command="echo py-started; sleep 100000",
                                      mounts=["pyclient-data"], wait=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        # Whatever a failed test left: nothing to assert here.
        try:
            cls.c.sessions.remove(cls.s.id)
        except TesseraError:
            pass
        try:
            cls.c.folders.remove("pyclient-data", force=True)
        except TesseraError:
            pass

    # ---- configuration and keys ----

    def test_a_reads_the_clis_configuration(self):
        me = self.c.whoami()
        self.assertEqual(me["email"], "admin@tessera.local")
        self.assertEqual(me["access_key"], self.c.config.access_key)
        self.assertEqual(self.c.config.file, os.environ["TESSERA_CONFIG"])
        # The same keys given explicitly, no file read.
        conf = self.c.config
        c2 = tessera_client.Client(config=False, endpoint=conf.endpoint, access_key=conf.access_key,
                                   secret_key=conf.secret_key)
        self.assertEqual(c2.whoami()["email"], "admin@tessera.local")

    # ---- sessions ----

    def test_b_create_and_wait(self):
        s = self.s
        self.assertEqual(s.status, "RUNNING")
        self.assertEqual(s.name, "py-nb")
        self.assertEqual(s.data["resources"]["mem"], 64 * MIB)
        self.assertEqual(s.data["resources"]["cpu"], 0.5)
        self.assertIn("py-nb", repr(s))

    def test_c_exec(self):
        code, out = self.s.exec(["sh", "-c", "echo out; echo $GREETING; exit 3"])
        self.assertEqual((code, out), (3, "out\nhi\n"))
        r = self.s.exec(["sh", "-c", "printf 'a\\0b'; printf err >&2"])
        self.assertEqual((r.exit_code, r.stdout, r.stderr), (0, b"a\0b", b"err"))
        # A string runs with sh -c; output is handed over as it comes.
        pieces = []
        code, out = self.s.exec("echo piped | wc -c", on_stdout=pieces.append)
        self.assertEqual((code, out.strip()), (0, "6"))   # "piped\n"
        self.assertEqual(b"".join(pieces).strip(), b"6")
        with self.assertRaises(TesseraError) as e:
            self.s.exec(["false"], check=True)
        self.assertIn("exited with code 1", str(e.exception))
        # The session's side stops a command past its timeout: code 124.
        code, out = self.s.exec(["sleep", "30"], timeout=1)
        self.assertEqual(code, 124)
        self.assertIn("timeout", out)

    def test_d_logs(self):
        log = eventually(lambda: "py-started" in self.s.logs() and self.s.logs(), "the startup command's echo in the log")
        self.assertEqual(log.splitlines()[0], "py-started")
        self.assertEqual(self.s.logs(tail=1).strip(), log.splitlines()[-1])

    def test_e_list_and_info(self):
        mine = self.c.sessions.list()
        self.assertIn(self.s.id, [x.id for x in mine])
        self.assertIn(self.s.id, [x.id for x in self.c.sessions.list(status=["RUNNING"])])
        self.assertNotIn(self.s.id, [x.id for x in self.c.sessions.list(status="PENDING")])
        by_name = self.c.sessions.get("py-nb")
        self.assertEqual(by_name.id, self.s.id)
        info = by_name.info()
        self.assertEqual(info["status_history"][0]["status"], "PENDING")
        self.assertEqual(self.c.sessions.info(self.s.id)["image"], self.s["image"])

    def test_f_app_link(self):
        apps = self.s.apps()
        self.assertEqual(apps[0]["name"], "terminal")
        url = self.s.app_link("terminal")
        self.assertIn("/__tessera/setup?token=", url)
        # The link works, once: the proxy sets the app's cookie.
        u = urllib.parse.urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("GET", u.path + "?" + u.query)
        r = conn.getresponse()
        r.read()
        conn.close()
        self.assertEqual(r.status, 302)
        self.assertIn("tessera_app", r.getheader("Set-Cookie", ""))
        with self.assertRaises(TesseraError) as e:
            self.s.app_link("no-such-app")
        self.assertEqual(e.exception.status, 400)
        self.assertIn("terminal", e.exception.message)   # the message lists the apps there are

    def test_g_folder_files(self):
        f = self.c.folders.get("pyclient-data")
        self.assertIn("pyclient-data", [x.name for x in self.c.folders.list()])
        f.mkdir("in/deep", parents=True)
        data = os.urandom(3 * MIB + 123)
        with tempfile.TemporaryDirectory() as d:
            local = os.path.join(d, "blob.bin")
            with open(local, "wb") as fh:
                fh.write(data)
            seen = []
            r = f.upload(local, "in/deep/blob.bin", progress=lambda done, total: seen.append((done, total)))
            self.assertEqual(r["size"], len(data))
            self.assertEqual(seen[0], (0, len(data)))
            self.assertEqual(seen[-1], (len(data), len(data)))
            self.assertEqual([p[0] for p in seen], sorted(p[0] for p in seen))
            self.assertGreater(len(seen), 2)
            ents = {e["name"]: e for e in f.files("in/deep")}
            self.assertEqual(ents["blob.bin"]["size"], len(data))

            got = []
            self.assertEqual(f.download("in/deep/blob.bin", progress=lambda done, total: got.append((done, total))), data)
            self.assertEqual(got[-1], (len(data), len(data)))
            self.assertGreater(len(got), 2)
            # A name ending in "/" is a directory, made when missing.
            out = f.download("in/deep/blob.bin", d + "/got/")
            self.assertEqual(out, os.path.join(d, "got", "blob.bin"))
            with open(out, "rb") as fh:
                self.assertEqual(fh.read(), data)
            self.assertFalse(os.path.exists(out + ".part"))

        # The session mounts the folder: the upload is there.
        code, out = self.s.exec(["sh", "-c", "wc -c < /home/work/pyclient-data/in/deep/blob.bin"])
        self.assertEqual((code, out.strip()), (0, str(len(data))))
        # And what the session writes comes back down.
        self.s.exec(["sh", "-c", "echo from-session > /home/work/pyclient-data/note.txt"], check=True)
        self.assertEqual(f.download("note.txt"), b"from-session\n")

        with self.assertRaises(TesseraError) as e:
            f.upload(b"again", "in/deep/blob.bin")
        self.assertEqual((e.exception.status, e.exception.code), (409, "conflict"))
        self.assertIn("exists", e.exception.message)
        f.upload(b"again", "in/deep/blob.bin", overwrite=True)
        self.assertEqual(f.download("in/deep/blob.bin"), b"again")
        f.move("in/deep/blob.bin", "moved.bin")
        f.delete("in", recursive=True)
        self.assertEqual(sorted(e["name"] for e in f.files()), ["moved.bin", "note.txt"])
        with self.assertRaises(TesseraError) as e:
            f.download("no/such/file")
        self.assertEqual(e.exception.status, 404)
        with self.assertRaises(TesseraError) as e:
            f.upload(b"x", "../escape")
        self.assertEqual(e.exception.status, 400)

    def test_h_images(self):
        refs = [i["ref"] for i in self.c.images.list()]
        want = IMAGE if ":" in IMAGE else IMAGE + ":latest"
        self.assertIn(want, refs)
        self.assertIsInstance(self.c.images.aliases(), dict)

    def test_i_stats(self):
        st = eventually(lambda: (lambda x: x if x["current"] else None)(self.s.stats()),
                        "a first usage sample of the session")
        cur = st["current"]
        self.assertEqual(cur["mem_limit_bytes"], 64 * MIB)
        self.assertIn("cpu_cores", cur)
        self.assertTrue(st["history"])
        self.assertEqual(st["id"], self.s.id)
        later = self.s.stats(since=st["history"][-1]["t"])
        self.assertTrue(all(x["t"] > st["history"][-1]["t"] for x in later["history"]))

    def test_j_errors(self):
        with self.assertRaises(TesseraError) as e:
            self.c.sessions.create(IMAGE, mem="lots")
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid_argument"))
        self.assertIn("resources.mem", e.exception.message)
        # fgpu reaches the manager: this server has no GPU to give.
        with self.assertRaises(TesseraError) as e:
            self.c.sessions.create(IMAGE, cpu=0.1, mem="16m", fgpu=0.5)
        self.assertEqual((e.exception.status, e.exception.code), (422, "unsatisfiable"))
        with self.assertRaises(TesseraError) as e:
            self.c.sessions.create("no-such-image-anywhere:1")
        self.assertEqual(e.exception.status, 400)
        self.assertIn("not present on any node", str(e.exception))
        with self.assertRaises(TesseraError) as e:
            self.c.sessions.get("no-such-session")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        with self.assertRaises(TesseraError) as e:
            self.c.sessions.create(IMAGE, name="py-nb")
        self.assertEqual(e.exception.status, 409)
        with self.assertRaises(TesseraError) as e:
            self.c.folders.create("pyclient-data")
        self.assertEqual(e.exception.status, 409)
        # Another secret: the manager refuses the signature.
        conf = self.c.config
        bad = tessera_client.Client(config=False, endpoint=conf.endpoint, access_key=conf.access_key,
                                    secret_key="not-the-secret")
        with self.assertRaises(TesseraError) as e:
            bad.whoami()
        self.assertEqual((e.exception.status, e.exception.code), (401, "unauthenticated"))
        # Nothing listening: no status, the endpoint named.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        gone = tessera_client.Client(config=False, endpoint="http://127.0.0.1:%d" % port, access_key="TK",
                                     secret_key="x", timeout=10)
        with self.assertRaises(TesseraError) as e:
            gone.whoami()
        self.assertIsNone(e.exception.status)
        self.assertIn("cannot reach the manager at http://127.0.0.1:%d" % port, str(e.exception))

    def test_k_batch(self):
        ok = self.c.sessions.create(IMAGE, cpu=0.1, mem="16m", batch=True, startup_command="echo one; echo two",
                                    wait=True, timeout=120)
        self.assertEqual((ok.status, ok.exit_code), ("TERMINATED", 0))
        # The runner's own line goes to stderr, which Docker copies beside
        # stdout, so it may come before the command's lines in the log.
        own = [l for l in ok.follow_logs() if not l.startswith("tessera-runner:")]
        self.assertEqual(own[:2], ["one\n", "two\n"])
        bad = self.c.sessions.create(IMAGE, cpu=0.1, mem="16m", batch=True, startup_command="exit 5",
                                     wait=True, timeout=120)
        self.assertEqual((bad.status, bad.exit_code), ("ERROR", 5))
        two = self.c.sessions.create_many(IMAGE, 2, name="py-many", cpu=0.1, mem="16m", batch=True,
                                          startup_command="true", wait=True, timeout=120)
        self.assertEqual([(x.name, x.status) for x in two], [("py-many-1", "TERMINATED"), ("py-many-2", "TERMINATED")])
        with self.assertRaises(TypeError):
            self.c.sessions.create_many(IMAGE, 2, memory="16m")
        for s in [ok, bad] + two:
            s.remove()
            self.assertTrue(s["removed"])

    def test_k2_launcher_options(self):
        import datetime
        # A start time an hour ahead keeps it PENDING, saying why.
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
        w = self.c.sessions.create(IMAGE, cpu=0.1, mem="16m", name="py-later", starts_at=later,
                                   preopen_ports=[8080])
        self.assertEqual(w.status, "PENDING")
        self.assertIsNotNone(w["starts_at"])
        self.assertEqual(w["preopen_ports"], [8080])
        for _ in range(100):
            if "waiting for its start time" in (w.refresh().status_info or ""):
                break
            time.sleep(0.1)
        self.assertIn("waiting for its start time", w.status_info)
        w.remove()
        self.assertEqual(w.status, "CANCELLED")
        # A batch command past its timeout ends as ERROR saying so.
        t = self.c.sessions.create(IMAGE, cpu=0.1, mem="16m", name="py-timeout", batch=True,
                                   startup_command="sleep 600", batch_timeout=1, wait=True, timeout=120)
        self.assertEqual(t.status, "ERROR")
        self.assertIn("batch timeout", t.status_info)
        t.remove()
        with self.assertRaises(tessera_client.TesseraError) as e:
            self.c.sessions.create(IMAGE, cpu=0.1, mem="16m", batch_timeout=5)
        self.assertIn("batch_timeout", str(e.exception))

    def test_k3_usage_summary(self):
        import datetime
        today = datetime.datetime.now(datetime.timezone.utc).date()
        r = self.c.usage_summary(since=today, until=today)
        self.assertEqual((r["from"], r["to"]), (today.isoformat(), today.isoformat()))
        me = self.c.whoami()["email"]
        self.assertIn(me, [t["user"] for t in r["totals"]])
        with self.assertRaises(tessera_client.TesseraError) as e:
            self.c.usage_summary(by="day")
        self.assertIn("by must be user or project", str(e.exception))

    def test_l_wait_timeout(self):
        # A policy of one session for this user: py-nb holds it, so a new
        # one waits PENDING, and a wait on it runs out.
        key = "/v1/config/policy." + self.c.whoami()["email"]
        self.c.request("PUT", key, body={"value": {"max_sessions": 1}})
        try:
            with self.assertRaises(tessera_client.WaitTimeout) as e:
                self.c.sessions.create(IMAGE, cpu=0.1, mem="16m", name="py-queued", wait=True, timeout=2)
            s = e.exception.session
            self.assertEqual((s.name, s.status), ("py-queued", "PENDING"))
            self.assertIn("still PENDING", str(e.exception))
            self.assertIn(s.status_info, str(e.exception))
            s.remove()
            self.assertEqual(s.status, "CANCELLED")
        finally:
            self.c.request("PUT", key, body={"value": None})

    def test_z_remove(self):
        self.s.remove(wait=True)
        self.assertEqual(self.s.status, "TERMINATED")
        self.assertNotIn(self.s.id, [x.id for x in self.c.sessions.list()])
        self.assertIn(self.s.id, [x.id for x in self.c.sessions.list(all=True)])
        with self.assertRaises(TesseraError) as e:
            self.s.exec(["true"])
        self.assertEqual(e.exception.status, 409)


if __name__ == "__main__":
    unittest.main()
