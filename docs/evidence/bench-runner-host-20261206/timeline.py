"""One `attnbench run` in this process with timestamps at its milestones (seconds from the script's start); the
supervisor's modules are wrapped once the command line has imported them (at the spec's load), not before."""
import sys, time
T0 = time.time()
sys.path.insert(0, '.')
marks = []
def mark(what): marks.append((time.time() - T0, what))
import runner.cli as cli
def wrap(module, name, label):
    real = getattr(module, name)
    def wrapped(*a, **k):
        mark(f"{label} begins")
        try:
            return real(*a, **k)
        finally:
            mark(f"{label} ends")
    setattr(module, name, wrapped)
def wrap_rest():
    import runner.supervisor as sup
    import runner.run as run
    wrap(sup.Worker, "begin", "worker start (Start -> hello)")
    wrap(run, "measure_all", "measure_all")
    wrap(run, "first_pull", "first pull")
    wrap(sup.Pool, "close", "pool close")
real_load = cli._load
def load(*a):
    mark("spec load (supervisor modules imported)")
    wrap_rest()
    return real_load(*a)
cli._load = load
try:
    import runner.launch as launch_mod
    wrap(launch_mod, "launch", "launch")
except ImportError:
    pass
wrap(cli, "_preflight", "preflight")
wrap(cli, "_run_report", "report")
mark("cli imported")
code = cli.main(sys.argv[1:])
mark(f"exit {code}")
for t, what in marks:
    print(f"{t:7.2f} {what}", file=sys.stderr)
