"""Helpers for resty.sluice's suites: Debian's nginx with Debian's
lua-nginx-module, unpacked (scripts/ngx-lua-root.sh) rather than installed
(its libluajit2 would remove the luajit and wrk packages), serving a config
whose Lua requires resty.sluice from the source tree over the libsluice.so
of the build."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "nginx"))
import ngxh  # noqa: E402

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINDING = os.path.join(SRC, "bindings", "lua-resty-sluice")
NDK = "/usr/lib/nginx/modules/ndk_http_module.so"
SECRET = "00112233445566778899aabbccddeeff"


def lua_root():
    """The unpacked packages' directory, or (None, why)."""
    root = os.environ.get("SLUICE_NGX_LUA_ROOT") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or
        os.path.join(os.path.expanduser("~"), ".cache"), "sluice", "ngx-lua")
    so = os.path.join(root, "usr/lib/nginx/modules/ngx_http_lua_module.so")
    if not os.path.exists(so):
        return None, ("lua-nginx-module is not unpacked in %s (run "
                      "scripts/ngx-lua-root.sh, which scripts/deps.sh runs)"
                      % root)
    if not os.path.exists(NDK):
        return None, "libnginx-mod-http-ndk is not installed"
    return root, None


def skip_reason():
    if not os.access(ngxh.NGINX, os.X_OK):
        return "nginx is not installed"
    return lua_root()[1]


HEAD = """
load_module %(ndk)s;
load_module %(root)s/usr/lib/nginx/modules/ngx_http_lua_module.so;
worker_processes %(workers)d;
error_log %(dir)s/error.log %(log_level)s;
pid %(dir)s/nginx.pid;
%(user)s
events { worker_connections 1024; }
http {
  access_log off;
  lua_package_path "%(lua_path)s%(binding)s/lib/?.lua;%(binding)s/?.lua;%(root)s/usr/share/lua/5.1/?.lua;;";
"""


class LuaNginx(ngxh.Nginx):
    """nginx with lua-nginx-module: HEAD, then `http` (the rest of the http
    block, %-formatted with the fields and dir, port, shm, lib, secret)."""

    def __init__(self, http, workers=2, log_level="notice", lua_path="",
                 **fields):
        root, why = lua_root()
        if why:
            raise SystemExit(why)
        self.dir = tempfile.mkdtemp(prefix="sluice-resty-")
        os.chmod(self.dir, 0o755)
        self.port = ngxh.free_port()
        self.shm = "/sluice-resty-%d-%d" % (os.getpid(), self.port)
        f = dict(fields, ndk=NDK, root=root, workers=workers, dir=self.dir,
                 log_level=log_level, lua_path=lua_path, binding=BINDING, port=self.port,
                 shm=self.shm, secret=SECRET,
                 user="user root;" if os.geteuid() == 0 else "")
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as fh:
            fh.write((HEAD + http + "\n}\n") % f)
        self.pidfile = os.path.join(self.dir, "nginx.pid")
        self.env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(
            root, "usr/lib/x86_64-linux-gnu"))

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        with open(self.path(name), "w") as fh:
            fh.write(text)
        return self.path(name)

    def cmd(self, *args):
        return subprocess.run([ngxh.NGINX, "-p", self.dir, "-c", self.conf] +
                              list(args), capture_output=True, text=True,
                              env=self.env)

    def stop(self):
        for n in ("", "-ctr", "-deg", "-deny"):
            try:
                os.unlink("/dev/shm" + self.shm + n)
            except OSError:
                pass
        ngxh.Nginx.stop(self)
