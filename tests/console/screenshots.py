"""Screenshots of the console's main pages, wide and phone-sized, for docs/console/: a gateway with real copies of
a TINY random-weight model, deployed from the Deploy page, under `pier bench` load while the charts fill.

    PYTHONPATH=src python3 -m tests.console.screenshots [OUT_DIR]     (default docs/console)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pier.synthetic.builder import TINY, build_gguf
from tests.console.browser import PHONE, WIDE, chromium, missing
from tests.e2e.gateway_process import GatewayProcess
from tests.server.processes import pier_environment
from tests.sockets import free_port

ENDPOINT, COMPONENT = "demo", "demo-chat"
WAIT_MS = 120_000


def main(out: Path) -> int:
    if missing():
        print(missing(), file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pier-console-") as scratch:
        root = Path(scratch)
        (root / "model").mkdir()
        build_gguf(root / "model" / "model.gguf", TINY, quant="Q8_0")
        with GatewayProcess(root / "state", free_port(), root / "gateway.log") as gateway, chromium() as browser:
            gateway.wait_ready()
            shoot(browser, gateway.url, root, out)
    return 0


def shoot(browser: Any, url: str, root: Path, out: Path) -> None:
    wide = browser.new_context(viewport=WIDE).new_page()
    phone = browser.new_context(viewport=PHONE, device_scale_factor=2).new_page()
    wide.goto(f"{url}/console#/deploy")
    wide.get_by_label("Deploy file (YAML)").fill(
        f"endpoint: {ENDPOINT}\ncomponents:\n  - name: {COMPONENT}\n    model: {{data: {root / 'model'}}}\n"
        "    copies: 2\n    cpus: 1\n    memory_mb: 256\n")
    wide.get_by_role("button", name="Deploy").click()
    wide.get_by_text("Done: the endpoint is as the file says").wait_for(timeout=WAIT_MS)
    save(wide, out / "deploy-wide.png")

    bench = threading.Thread(target=run_bench, args=(url, root / "bench"))
    bench.start()
    wide.goto(f"{url}/console#/charts")
    phone.goto(f"{url}/console#/charts")
    bench.join()
    save(wide, out / "charts-wide.png")
    save(phone, out / "charts-phone.png")

    for page, kind in ((wide, "wide"), (phone, "phone")):
        page.goto(f"{url}/console#/endpoints")
        page.locator(".copies-count", has_text="2 / 2").wait_for(timeout=WAIT_MS)
        save(page, out / f"endpoints-{kind}.png")
        page.goto(f"{url}/console#/copies")
        page.get_by_role("button", name="Show log").first.click()
        page.get_by_role("log").filter(has_text="ready in").wait_for(timeout=WAIT_MS)
        save(page, out / f"copies-{kind}.png")
        page.goto(f"{url}/console#/playground")
        page.get_by_label("Model").select_option(COMPONENT)
        page.get_by_label("Message").fill("Write a short poem about a pier.")
        page.get_by_role("button", name="Send").click()
        page.locator(".chat li.assistant").first.wait_for(timeout=WAIT_MS)
        page.get_by_text("curl", exact=True).click()
        save(page, out / f"playground-{kind}.png")
        page.goto(f"{url}/console#/bench")
        page.get_by_label("summary.json").set_input_files(str(root / "bench" / "summary.json"))
        page.locator("figure.chart canvas").first.wait_for(timeout=WAIT_MS)
        save(page, out / f"bench-{kind}.png")


def run_bench(url: str, out: Path) -> None:
    """Load for the charts, and a summary.json for the bench page: three concurrency levels through the gateway."""
    time.sleep(4)  # a few idle points first
    subprocess.run([sys.executable, "-m", "pier", "bench", f"{url}/v1", "--model", COMPONENT, "--concurrency",
                    "1,2,4", "--requests", "24", "--output-len", "48", "--out", str(out), "--no-progress"],
                   check=True, env=pier_environment(), stdout=subprocess.DEVNULL)
    time.sleep(4)


def save(page: Any, path: Path) -> None:
    time.sleep(1)  # the last poll drawn
    page.screenshot(path=str(path), full_page=True)
    print(path)


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/console")))
