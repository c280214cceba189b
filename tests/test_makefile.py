"""The Makefile's newcomer targets, as `make -n` prints them (what `make demo` then `make dashboard` opens), and what
`make test-tools`' script installs, run with its installers stubbed."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess

from helpers import REPO



def planned(target: str, **variables: str) -> list[str]:
    """The attnbench command lines `make -n TARGET` would run (the venv's own setup, if due, left out)."""
    done = subprocess.run(["make", "-n", "-C", str(REPO), target, *(f"{k}={v}" for k, v in variables.items())],
                          capture_output=True, text=True, check=True)
    return [line for line in done.stdout.splitlines() if "attnbench " in line]


def test_the_dashboard_is_attnbench_dashboards_default_or_results():
    """make dashboard leaves the choice of results/ (the demo's) or the shipped runs to attnbench dashboard's default
    (dashboard.data.default_results; tests/test_cli.py tries it), where it spelt the rule again."""
    assert planned("dashboard")[-1].endswith("attnbench dashboard ")
    assert planned("dashboard", RESULTS="gs://b/p")[-1].endswith("attnbench dashboard --results gs://b/p")


def test_the_demos_last_line_says_how_to_see_the_run(tmp_path):
    lines = planned("demo", DEMO_RESULTS=str(tmp_path))
    assert f"--out {tmp_path}/" in lines[0]
    assert "see it: make dashboard" in lines[-1]
    assert "(.venv/bin/attnbench runs lists them)" in lines[-1]  # a command that runs from the checkout, as README's


def test_the_quiet_install_says_what_it_does_and_how_long_before_it_starts():
    """pip installs quietly (-q) for about 2 minutes on a fresh machine: a line before it says so (make -n -B: the
    install as a fresh clone would run it, nothing run)."""
    done = subprocess.run(["make", "-n", "-B", "--no-print-directory", ".venv/.installed"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout.splitlines()
    assert done[0].startswith("echo ") and "about 2 minutes" in done[0] and "-m venv" in done[1]


def test_clean_keeps_the_test_tools_which_clean_tools_removes():
    def made(target: str) -> str:
        # --no-print-directory: under `make test` this make is a sub-make, which names its directory otherwise
        return subprocess.run(["make", "-n", "--no-print-directory", target], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout

    assert ".venv-tools" not in made("clean") and "results build" in made("clean")
    assert made("clean-tools").strip() == "rm -rf .venv-tools"


def install_test_tools(tmp_path, python312: str = "", uid: int = 0, chromium: str = "/usr/bin/chromium",
                       **env: str) -> tuple[list[str], str]:
    """Run scripts/install-test-tools.sh from a copy of the checkout's layout with every installer stubbed (each
    records its call), its other tools' stamps current; the installers' calls, and what it said on stderr.
    `python312`: the version a stand-in python3.12 answers (the line scripts/tokamax_venv_inputs.py prints from it);
    empty, python3.12 and python3.13 fail to run, as pyenv's shims of versions it does not activate do. `uid`: what
    `id -u` answers. `chromium`: where the script looks for Debian's (a path not there: a machine without it). PATH
    holds the stubs and the few tools the script runs: no tini until the apt-get stub installs one."""
    root = tmp_path / "root"
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    script = (REPO / "scripts" / "install-test-tools.sh").read_text()
    (root / "scripts" / "install-test-tools.sh").write_text(script.replace("/usr/bin/chromium", chromium))
    (root / "docker").mkdir(exist_ok=True)
    pins = root / "docker" / "runner-requirements.txt"
    pins.write_text("jax==0\n")
    stamp = root / ".venv-tools" / "runner-image" / ".installed"
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(hashlib.sha256(pins.read_bytes()).hexdigest() + "\n")
    calls, stubs = tmp_path / "calls", tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    for name in ("apt-get", "npm", "python3"):  # python3 -m venv DIR: a DIR/bin/pip that records its calls too
        (stubs / name).write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> {calls}\ncase "$1 $2" in\n'
                                  '"-m venv") mkdir -p "$3/bin"; cp "$0" "$3/bin/pip";;\n'
                                  '"install --prefix") mkdir -p "$3";;\nesac\n')
    (stubs / "python3.12").write_text(f'#!/bin/sh\n[ -n "$STUB_PYTHON312" ] || exit 127\ncase "$1" in\n'
                                      '-c) exit 0;;\n'  # the version check: >= 3.12
                                      f'-m) echo "python3.12 $*" >> {calls}; mkdir -p "$3/bin"; '
                                      f'cp {stubs / "python3"} "$3/bin/pip";;\n'
                                      '*) echo "{\\"python\\": \\"$STUB_PYTHON312\\"}";;\nesac\n')
    (stubs / "python3.13").write_text("#!/bin/sh\nexit 127\n")
    (stubs / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    with (stubs / "apt-get").open("a") as apt_get:  # installing tini puts one on PATH, as apt-get's would be
        apt_get.write('case "$*" in "install "*tini) printf "#!/bin/sh\\n" > "$(dirname "$0")/tini"; '
                      'chmod +x "$(dirname "$0")/tini";; esac\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    for tool in ("sh", "dirname", "cat", "sha256sum", "cut", "basename", "mkdir", "cp", "rm", "chmod"):
        if not (stubs / tool).exists():
            (stubs / tool).symlink_to(shutil.which(tool))
    path = str(stubs)
    done = subprocess.run([shutil.which("bash"), str(root / "scripts" / "install-test-tools.sh")], check=True,
                          capture_output=True, text=True,
                          env={"PATH": path, "HOME": str(tmp_path), "STUB_PYTHON312": python312, **env})
    return (calls.read_text().splitlines() if calls.exists() else []), done.stderr


def apt_installs(*packages: str) -> list[str]:
    """The apt-get calls install-test-tools makes for these Debian packages: chromium where this machine lacks it,
    tini always (install_test_tools' PATH has none to begin with)."""
    missing = [p for p in packages if p == "tini" or not os.access(f"/usr/bin/{p}", os.X_OK)]
    return ["apt-get update -q", f"apt-get install -y -q --no-install-recommends {' '.join(missing)}"] if missing else []


def test_install_test_tools_installs_chromium_and_tini_only_where_none_is_there(tmp_path):
    named, _ = install_test_tools(tmp_path / "named", ATTNBENCH_CHROMIUM="/opt/chromium/chrome")
    assert [c for c in named if c.startswith("apt-get")] == apt_installs("tini")
    assert any(c.startswith("npm install") for c in named)
    unnamed = [c for c in install_test_tools(tmp_path / "unnamed")[0] if c.startswith("apt-get")]
    assert unnamed == apt_installs("chromium", "tini")
    again, _ = install_test_tools(tmp_path / "named", ATTNBENCH_CHROMIUM="/opt/chromium/chrome")
    assert again == named  # its stamps were fresh: only the recorded calls of the first run


def test_install_test_tools_without_root_leaves_tini_out_in_one_line_as_its_test_only_skips(tmp_path):
    calls, said = install_test_tools(tmp_path, uid=1000, ATTNBENCH_CHROMIUM="/opt/chromium/chrome")
    assert not [c for c in calls if c.startswith("apt-get")]  # apt-get's lock stopped make test-tools here
    assert said == ("install-test-tools: tini is not on PATH and apt-get needs root: not installed, so "
                    "tests/test_termination.py's PID-1 test skips (apt-get install tini, as root, to run it)\n"
                    "install-test-tools: no Python >= 3.12 here (python3.12, python3.13, pyenv's, or "
                    f"ATTNBENCH_PYTHON312=/path): {tmp_path / 'root' / '.venv-tools' / 'tokamax'} not built, so "
                    "tests/test_tokamax_cpu.py will fail\n")


def test_install_test_tools_without_root_or_chromium_leaves_it_out_in_one_line_naming_attnbench_chromium(tmp_path):
    calls, said = install_test_tools(tmp_path, uid=1000, chromium=str(tmp_path / "none"))
    assert not [c for c in calls if c.startswith("apt-get")]  # apt-get's lock stopped make test-tools here
    assert said.splitlines()[0] == (f"install-test-tools: no chromium at {tmp_path / 'none'} and apt-get needs root: not "
                                    "installed, so tests/test_dashboard_browser.py fails (ATTNBENCH_CHROMIUM="
                                    "/path/to/chromium names one there)")


def test_install_test_tools_builds_the_tokamax_venv_from_a_python_312_again_only_when_its_inputs_change(tmp_path):
    venv = tmp_path / "root" / ".venv-tools" / "tokamax"
    built = [f"python3.12 -m venv {venv}", "pip install -q --upgrade pip",
             f"pip install -q {tmp_path / 'root'}[jax,tokamax]"]
    first, said = install_test_tools(tmp_path, python312="3.12.1")
    assert first[-3:] == built and first.count(built[0]) == 1 and said == ""  # the script's last step
    assert (venv / ".installed").read_text() == '{"python": "3.12.1"}\n'
    assert install_test_tools(tmp_path, python312="3.12.1")[0] == first  # its stamp was fresh: nothing new
    assert install_test_tools(tmp_path, python312="3.12.2")[0] == first + built  # another interpreter: rebuilt


def test_without_a_python_312_install_test_tools_says_so_in_one_line_and_installs_the_rest(tmp_path):
    calls, said = install_test_tools(tmp_path)
    assert said.splitlines() == [f"install-test-tools: no Python >= 3.12 here (python3.12, python3.13, pyenv's, or "
                                 f"ATTNBENCH_PYTHON312=/path): {tmp_path}/root/.venv-tools/tokamax not built, so "
                                 "tests/test_tokamax_cpu.py will fail"]
    assert any(c.startswith("npm install") for c in calls) and not (tmp_path / "root/.venv-tools/tokamax").exists()


def test_make_docs_serves_the_site_and_make_results_pages_writes_its_pages():
    serve = subprocess.run(["make", "-n", "--old-file=.venv/.installed", "-C", str(REPO), "docs"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    assert "NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve" in serve
    pages = subprocess.run(["make", "-n", "--old-file=.venv/.installed", "-C", str(REPO), "results-pages"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert ".venv/bin/python scripts/results_pages.py" in pages


def test_make_test_runs_the_suite_on_two_workers_each_given_whole_files():
    def pytest_line(*variables: str) -> str:
        done = subprocess.run(["make", "-n", "--old-file=.venv/.installed", "-C", str(REPO), "test", *variables],
                              capture_output=True, text=True, check=True)
        (line,) = [line for line in done.stdout.splitlines() if "pytest" in line]
        return line

    assert pytest_line() == ".venv/bin/pytest -n 2 --dist loadfile"
    assert pytest_line("TEST_WORKERS=0") == ".venv/bin/pytest -n 0 --dist loadfile"  # one process
