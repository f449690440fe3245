"""The built wheel, installed into a fresh venv, works outside the source checkout.

A source checkout hides missing package data: the prompts, the ranker weights and the configs are
read from the repository whatever the wheel holds. Here the wheel is built from the tracked sources,
installed (`--no-deps`) into a new venv that sees the project's .venv only for the dependencies
(a .pth line: .pth files *inside* that folder, such as the editable install's finder, are not
processed, so the checkout is not importable), and run from an empty directory: `hypa ingest`, then
`hypa ask --json` with ANTHROPIC_API_KEY against the fake Anthropic API through the real SDK.

Fast on purpose (no dependency install, no network): ~15 s, most of it the embedding model's one-time
ONNX export. Runs in `make test` (.ci/run); `-m "not wheel"` skips it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "core", "storage", "adapters", "prompts")
pytestmark = [
    pytest.mark.wheel,
    pytest.mark.model,
    pytest.mark.skipif(sys.platform == "win32", reason="venv layout differs on Windows"),
]

DOC = """# Toy Code

§ 1-101 Definitions. The term “widget” means a small device sold to the public.

§ 1-102 Notice. A seller shall notify each buyer ten days before a sale of a widget.
"""


def _tracked_sources(dest: Path) -> list[str]:
    """Copy what the wheel is built from (tracked files only: nothing a developer left lying around)."""
    listed = subprocess.run(
        ["git", "ls-files", "pyproject.toml", "README.md", *PACKAGES],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    if listed.returncode != 0 or not listed.stdout.strip():
        pytest.skip("not a git checkout: cannot tell tracked sources from local files")
    files = listed.stdout.split()
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return files


def _quote_first_document(request):
    """Fake Claude: the first document's text, cited correctly."""
    from hypa_testkit.fakes.anthropic_server import cite, message, reply, text_block

    content = request.body["messages"][-1]["content"]
    document = next(block for block in content if block.get("type") == "document")
    text = document["source"]["data"]
    quote = text.strip()
    return reply(message([text_block(quote, [cite(0, text, quote)])], model="claude-wheel-test"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    try:
        import setuptools  # noqa: F401 - the build backend, used without build isolation (offline)
    except ImportError:
        pytest.skip("setuptools is not installed in this environment: cannot build the wheel offline")
    tmp = tmp_path_factory.mktemp("wheel")
    src, dist, venv = tmp / "src", tmp / "dist", tmp / "venv"
    files = _tracked_sources(src)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(dist), str(src)],
        check=True, capture_output=True, text=True,
    )
    (wheel,) = dist.glob("hypa_rag-*.whl")
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip())
    # The dependencies, from the project's environment (appended after the venv's own site-packages).
    (purelib / "hypa-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, text=True,
    )
    return {"wheel": wheel, "venv": venv, "purelib": purelib, "files": files, "tmp": tmp}


def _env(**extra: str) -> dict[str, str]:
    """The test's environment without hypa's settings or import paths, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HYPA_", "ANTHROPIC_", "SLACK_", "TELEGRAM_", "WEAVIATE_")) and k != "PYTHONPATH"}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


def test_every_file_the_code_may_read_is_in_the_wheel(installed):
    """Each tracked non-Python file under the packages (prompts, ranker weights, configs, the
    migration template, the Slack manifest) is package data."""
    shipped = set(zipfile.ZipFile(installed["wheel"]).namelist())
    data_files = [f for f in installed["files"] if f.split("/")[0] in PACKAGES and not f.endswith(".py")]
    assert "prompts/answer_system.v2.md" in data_files and "core/ranking_weights.json" in data_files
    assert [f for f in data_files if f not in shipped] == []


def test_the_installed_wheel_answers_with_claude_from_an_empty_directory(installed, tmp_path):
    from hypa_testkit.fakes.anthropic_server import FakeAnthropic

    venv, purelib = installed["venv"], installed["purelib"]
    hypa = venv / "bin" / "hypa"
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import bot, core; print(bot.__file__); print(core.__file__)"],
        cwd=tmp_path, env=_env(), check=True, capture_output=True, text=True,
    ).stdout.split()
    assert all(Path(p).is_relative_to(purelib) for p in where), where  # the wheel's code, not the checkout's

    (tmp_path / "toy.md").write_text(DOC, encoding="utf-8")
    ingest = subprocess.run(
        [str(hypa), "ingest", "toy.md", "--collection", "toy"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    assert (tmp_path / "data" / "index").is_dir()  # the default data directory is ./data ...
    assert not (purelib / "data").exists()  # ... not site-packages/data

    with FakeAnthropic(default=_quote_first_document) as fake:
        env = _env(ANTHROPIC_API_KEY="test-key", HYPA_ANTHROPIC_BASE_URL=fake.base_url, HYPA_LLM_MAX_RETRIES="0")
        ask = subprocess.run(
            [str(hypa), "ask", "When must a seller notify each buyer?", "--collection", "toy", "--json"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )
        assert ask.returncode == 0, ask.stdout + ask.stderr
        assert "PromptNotFound" not in ask.stderr
        record = json.loads(ask.stdout)
        assert record["model"] == "claude-wheel-test" and record["refused"] is False, record
        assert record["citations"] and "ten days" in record["answer"]
        sent = fake.message_requests[-1].body
        assert sent["system"][0]["text"].startswith("You are a careful compliance assistant")  # the shipped prompt
