"""`rocketlake report` writes one self-contained page that headless Chromium renders."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from matplotlib import image

from rocketlake.jobs.cli import main
from rocketlake.store import Message, MessageStore

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture()
def report(tmp_path):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message(t, b"x" * 50, q, tags="A", store_timestamp=1_700_000_000_000 + i * 250)
                      for i, (t, q) in enumerate((t, q) for t in ("orders", "audit") for q in range(3)
                                                  for _ in range(40))])
    out = tmp_path / "r" / "report.html"
    assert main(["report", "--store", str(root), "--out", str(out)]) == 0
    return out


def test_page_is_self_contained_and_has_the_sections(report):
    page = report.read_text()
    for section in ("Store layout", "Message rate", "Consumer lag", "Last maintenance runs"):
        assert section in page
    imgs = re.findall(r'<img alt="[^"]+" src="([^"]+)"', page)
    assert len(imgs) == 3 and all(src.startswith("data:image/png;base64,") for src in imgs)
    assert not re.search(r'(src|href)="(http|//)', page)  # nothing fetched from elsewhere
    assert "<div class=v>240</div><div class=k>messages</div>" in page  # 2 topics x 3 queues x 40
    assert page.count("<td>40</td>") >= 6  # each queue row: 40 messages


def test_headless_chromium_renders_a_non_blank_page(report, tmp_path):
    assert CHROMIUM, "chromium is not installed (make test installs Debian's chromium)"
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1600",
                    f"--screenshot={shot}", report.as_uri()], check=True, timeout=120,
                   capture_output=True)
    px = image.imread(shot)[..., :3]
    assert px.shape[0] >= 1000 and px.shape[1] >= 1000
    colours = np.unique((px * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50                       # charts and text, not a blank page
    assert (px < 0.5).mean() > 0.01                # some dark ink on the white background
