"""Time LocalStore.delete over N per-cell objects of one part folder: python scripts/bench_delete.py ROOT_OF_CHECKOUT N."""
import sys, time, tempfile, os
sys.path.insert(0, sys.argv[1])
from runner.store import LocalStore
n = int(sys.argv[2])
root = tempfile.mkdtemp(dir="/tmp")
st = LocalStore(root)
os.makedirs(f"{root}/run/cells.part", exist_ok=True)
for i in range(n):
    open(f"{root}/run/cells.part/{i:06d}.json", "wb").close()
t = time.perf_counter()
for i in range(n):
    st.delete(f"run/cells.part/{i:06d}.json")
dt = time.perf_counter() - t
print(f"{n} deletes: {dt:.2f} s, {n/dt:.0f}/s, folder gone: {not os.path.exists(root + '/run/cells.part')}")
