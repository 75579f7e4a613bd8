"""The documentation site (docs/, Sphinx): it builds without a warning, every internal link and image of the built
pages resolves, and, in headless Chromium, the pages load, their navigation links resolve and the plots and the
architecture diagram render.

The build runs once per session (``built_site``), as ``scripts/docs.sh`` runs it: ``python -m sphinx -W --keep-going
-b html docs OUT``. It needs the docs' Python packages (sphinx, myst-parser, furo, and onnxscript, which the modules
the ONNX table is read from import) and Graphviz's ``dot``; the browser checks need Debian's ``chromium`` and skip
where it is missing. Without the docs' packages the whole module skips, unless CUSTOMOPS_REQUIRE_DOCS_TEST is set
(as it should be wherever they are meant to be installed).
"""

from __future__ import annotations

import base64
import html.parser
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch_independent

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# Pages the browser opens: the landing page, and the pages with generated tables, plots and the diagram.
BROWSER_PAGES = [
    "index.html",
    "guide/ops.html",
    "guide/api.html",
    "design/architecture.html",
    "performance/index.html",
    "performance/ops_cuda.html",
    "performance/models.html",
    "performance/cpu.html",
]
# Pages whose every image must be a plot that renders (and that must have one).
PLOT_PAGES = ["performance/ops_cuda.html", "performance/models.html", "performance/zoo.html", "performance/cpu.html"]


def _missing_docs_packages() -> list[str]:
    import importlib.util

    return [m for m in ("sphinx", "myst_parser", "furo", "onnxscript") if importlib.util.find_spec(m) is None]


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("CUSTOMOPS_REQUIRE_DOCS_TEST"):
        pytest.fail(f"{reason} (CUSTOMOPS_REQUIRE_DOCS_TEST is set)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    missing = _missing_docs_packages()
    if missing:
        _skip_or_fail(f"the docs' Python packages are not installed: {', '.join(missing)}")
    if shutil.which("dot") is None:
        _skip_or_fail("Graphviz's dot is not installed (Debian package graphviz): the architecture diagram needs it")
    out = tmp_path_factory.mktemp("docs") / "html"
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line or "ERROR" in line]
    assert done.returncode == 0 and not warnings, (
        f"the docs build failed or warned ({' '.join(command)}, exit {done.returncode}):\n"
        + "\n".join(warnings or done.stderr.splitlines()[-40:]))
    return out


# --- the built files, without a browser ----------------------------------------------------------------------


class _Page(html.parser.HTMLParser):
    """The ids, link targets and image sources of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.hrefs: list[str] = []
        self.images: list[str] = []
        self.objects: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
        elif tag == "img" and a.get("src"):
            self.images.append(a["src"])
        elif tag == "object" and a.get("data"):
            self.objects.append(a["data"])


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _local_target(page: Path, ref: str) -> tuple[Path, str] | None:
    """The file and fragment a relative link of ``page`` points at; None for other schemes and absolute URLs."""
    parts = urllib.parse.urlsplit(ref)
    if parts.scheme or parts.netloc:
        return None
    target = page if not parts.path else (page.parent / urllib.parse.unquote(parts.path)).resolve()
    if target.is_dir():
        target = target / "index.html"
    return target, urllib.parse.unquote(parts.fragment)


@pytest.mark.every_op
def test_docs_build_without_warnings(built_site):
    for page in ["index.html", "guide/ops.html", "guide/api.html", "guide/convert.html", "deploy.html",
                 "design/architecture.html", "design/stable_abi.html", "performance/index.html"]:
        assert (built_site / page).is_file(), f"{page} was not built"


@pytest.mark.every_op
def test_api_pages_document_every_function_and_module(built_site):
    import customops

    api = (built_site / "guide/api.html").read_text(encoding="utf-8")
    convert = (built_site / "guide/convert.html").read_text(encoding="utf-8")
    names = [n for n in customops.__all__ if n[0].isupper() or callable(getattr(customops, n))]
    for name in names:
        anchor = f'id="customops.{name}"'
        assert anchor in api or anchor in convert, f"customops.{name} is missing from the API pages"


@pytest.mark.every_op
def test_schema_and_dispatch_tables_list_every_op(built_site):
    import torch

    import customops

    ops_page = _text(built_site / "guide/ops.html")
    architecture = _text(built_site / "design/architecture.html")
    names = [f"customops::{n}" for n in customops._library.registered_ops()]
    assert names
    for name in names:
        packet = getattr(torch.ops.customops, name.split("::")[1])
        assert "default" in packet.overloads()
        for overload in packet.overloads():
            qualified = name if overload == "default" else f"{name}.{overload}"
            schema = str(getattr(packet, overload)._schema)
            assert schema in ops_page, f"{qualified}'s schema is missing from guide/ops.html"
            assert qualified in architecture, f"{qualified} is missing from the dispatch-key table"


def _text(path: Path) -> str:
    """A page's text: tags dropped, entities decoded, whitespace runs made single spaces."""
    import html

    text = re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))
    return re.sub(r"\s+", " ", html.unescape(text))


def test_internal_links_and_images_resolve(built_site):
    """Every relative link of every built page points at a built file (and, with a fragment, at an id in it), and
    every image and embedded object exists."""
    problems = []
    pages = {p: _parse(p) for p in built_site.rglob("*.html")}
    for page, parsed in pages.items():
        name = page.relative_to(built_site)
        for ref in parsed.hrefs:
            target = _local_target(page, ref)
            if target is None:
                continue
            path, fragment = target
            if not path.exists():
                problems.append(f"{name}: link {ref} -> missing {path}")
            elif fragment and path.suffix == ".html":
                ids = pages[path].ids if path in pages else _parse(path).ids
                if fragment not in ids:
                    problems.append(f"{name}: link {ref} -> no id {fragment!r} in {path.name}")
        for src in parsed.images + parsed.objects:
            target = _local_target(page, src)
            if target is not None and not target[0].is_file():
                problems.append(f"{name}: image {src} -> missing {target[0]}")
    assert not problems, "\n".join(problems)


def test_performance_pages_show_their_plots(built_site):
    for page in PLOT_PAGES:
        parsed = _parse(built_site / page)
        plots = [src for src in parsed.images if src.endswith(".png")]
        assert plots, f"{page} shows no plot"
        for src in plots:
            data = (built_site / page).parent.joinpath(src).resolve().read_bytes()
            assert data.startswith(b"\x89PNG\r\n\x1a\n"), f"{page}: {src} is not a PNG"


# --- in headless Chromium ----------------------------------------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """Headless Chromium driven through the DevTools protocol over a pipe (--remote-debugging-pipe: JSON messages
    ending in NUL, commands on the browser's fd 3, replies and events on its fd 4), so that no driver package is
    needed. Its log (mostly complaints about the missing D-Bus) goes to a file in the profile directory."""

    def __init__(self, executable: str, profile: Path, width: int = 1280, height: int = 900) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser's ends, moved to fds 10 and up: the shell below puts them on fds 3 and 4, where Chromium
        # expects them, and must not find either already sitting on 3 or 4.
        to_browser_r, from_browser_w = (self._move_up(fd) for fd in (to_browser_r, from_browser_w))
        self.log = profile / "chromium.log"
        args = [executable, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"]
        script = f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-'
        with open(self.log, "wb") as log:
            self._proc = subprocess.Popen(["bash", "-c", script, "bash", *args],
                                          pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    @staticmethod
    def _move_up(fd: int) -> int:
        import fcntl

        moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
        os.close(fd)
        return moved

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe; its log ends:\n"
                                   + self.log.read_text(errors="replace")[-2000:])
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: bool = False, timeout: float = 30) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_for_event(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method:
                    return self._events.pop(i)
            self._events.append(self._read_message(deadline))

    def open(self, url: str) -> None:
        self._events.clear()
        result = self.call("Page.navigate", {"url": url}, session=True)
        if result.get("errorText"):
            raise RuntimeError(f"{url}: {result['errorText']}")
        self.wait_for_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self._proc.pid, 9)  # the browser's own process group (start_new_session): its helpers too
            self._proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


# What the browser reports about a loaded page, once every image has loaded or failed.
PAGE_REPORT = """
(async () => {
  await Promise.all([...document.images].map(img => img.complete ? null :
      new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })));
  const box = e => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  return {
    title: document.title,
    h1: [...document.querySelectorAll('article h1')].map(h => h.textContent),
    textLength: (document.querySelector('article') || document.body).innerText.length,
    navigation: [...document.querySelectorAll('.sidebar-tree a')].map(a => a.href),
    links: [...document.querySelectorAll('article a[href]')].map(a => a.href),
    images: [...document.images].map(img => ({src: img.currentSrc || img.src, naturalWidth: img.naturalWidth,
                                               naturalHeight: img.naturalHeight, box: box(img)})),
    // An <object>'s document is out of reach from a file: page (a separate origin), so its SVG is decoded again
    // as an image: it renders if that gives it a size.
    objects: await Promise.all([...document.querySelectorAll('object')].map(o => new Promise(done => {
      const img = new Image();
      const report = () => done({data: o.data, type: o.type, box: box(o), naturalWidth: img.naturalWidth});
      img.addEventListener('load', report);
      img.addEventListener('error', report);
      img.src = o.data;
    }))),
  };
})()
"""


@pytest.fixture(scope="module")
def browser(built_site, tmp_path_factory):
    executable = _chromium()
    if executable is None:
        pytest.skip("Chromium is not installed (Debian package chromium): the in-browser checks need it")
    browser = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


def _file_of(url: str) -> Path:
    return Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path))


@pytest.mark.parametrize("page", BROWSER_PAGES)
def test_page_in_browser(built_site, browser, page, tmp_path):
    browser.open((built_site / page).as_uri())
    report = browser.evaluate(PAGE_REPORT)
    browser.screenshot(tmp_path / "page.png")  # kept in pytest's temporary directory, for a look after a failure
    assert report["h1"], f"{page}: no page title"
    assert report["textLength"] > 200, f"{page}: the page is (nearly) empty"

    # The sidebar's navigation lists every page of the site's table of contents, and each link resolves.
    navigation = report["navigation"]
    assert len(navigation) >= 15, f"{page}: {len(navigation)} navigation links"
    for url in navigation + [u for u in report["links"] if u.startswith("file:")]:
        assert _file_of(url).is_file(), f"{page}: link {url} points at no file"

    for image in report["images"]:
        if not image["src"].startswith("file:"):
            continue
        assert image["naturalWidth"] > 0 and image["naturalHeight"] > 0, f"{page}: image {image['src']} did not render"
        assert image["box"][0] > 0 and image["box"][1] > 0, f"{page}: image {image['src']} is not shown"
    for obj in report["objects"]:
        assert obj["box"][0] > 100 and obj["box"][1] > 50, f"{page}: {obj['data']} is not shown"
        assert obj["naturalWidth"] > 0, f"{page}: {obj['data']} ({obj['type']}) did not render"
    if page in PLOT_PAGES:
        assert any(i["src"].endswith(".png") for i in report["images"]), f"{page}: no plot"
    if page == "design/architecture.html":
        assert report["objects"], "the architecture diagram is missing"
