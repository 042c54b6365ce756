#!/usr/bin/env python3
"""scripts/start_order.py on lines captured from LLD 22's map of the release build and from
callgrind 3.19's output (docs/build.md, "Start-up layout"): which pattern each function that ran
becomes, and that the script LLD reads is well formed.

    python3 tests/start_order_test.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "start_order.py")
OBJ = ("/work/main/target/start-order/x86_64-unknown-linux-gnu/release/deps/"
       "nccl_wrap-176edcec97c85755.nccl_wrap.5a9497564db5a9e3-cgu.0.rcgu.o")
RLIB = ("/work/main/target/start-order/x86_64-unknown-linux-gnu/release/deps/rustcujpvgj/"
        "libnccl_wrap-c66815b685127d16.rlib")
MAP = f"""\
             VMA              LMA     Size Align Out     In      Symbol
          2bf470           2bf470       81    16         {OBJ}:(.text.unlikely._RNvMs4_NtCslNYArtu3iFV_5alloc7raw_vecNtB5_11RawVecInner11finish_growB7_)
          2bf470           2bf470       81     1                 <alloc::raw_vec::RawVecInner>::finish_grow
          35fa03           35fa03     852e     1         {OBJ}:(.text._ZN9nccl_wrap6detect7devices6detect17h62ca116839ec0a7eE)
          35fa03           35fa03     852e     1                 nccl_wrap::detect::devices::detect::h62ca116839ec0a7e
          3ea310           3ea310        c    16         {RLIB}(mlx5.c.o):(.text.startup)
          3ea310           3ea310        c     1                 drv__register_driver
          3ea320           3ea320        c    16         {RLIB}(rxe.c.o):(.text.startup)
          3ea320           3ea320        c     1                 drv__register_driver
          42e100           42e100       20    16         /usr/lib/x86_64-linux-gnu/libm-2.36.a(s_trunc.o):(.text)
          42e100           42e100       20     1                 __trunc_ifunc
          480460           480460       f6    16         /usr/lib/x86_64-linux-gnu/libc.a(memmove.o):(.text)
          480460           480460       f6     1                 __libc_memmove_ifunc
          485540           485540      83b    64         /usr/lib/x86_64-linux-gnu/libc.a(memmove-evex-unaligned-erms.o):(.text.evex)
          485540           485540        8     1                 __mempcpy_evex_unaligned
          4a0000           4a0000      100    16         /usr/lib/x86_64-linux-gnu/libc.a(malloc.o):(.text)
          4a0000           4a0000       40     1                 _int_malloc
          4b3a20           4b3a20       30    16         /usr/lib/x86_64-linux-gnu/libc.a(execve.o):(.text)
          4b3a20           4b3a20       30     1                 execve
          4f2040           4f2040        8     8         /usr/lib/x86_64-linux-gnu/libc.a(malloc.o):(.data)
          4f2040           4f2040        8     1                 main_arena
"""
CALLGRIND = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
cmd:  /work/main/target/start-order/x86_64-unknown-linux-gnu/release/nccl-wrap -q -- /bin/true
fn=_ZN9nccl_wrap6detect7devices6detect17hbfe882c7743a58f6E
0 12
cfn=_RNvMs4_NtCslNYArtu3iFV_5alloc7raw_vecNtB5_11RawVecInner11finish_growB7_
calls=1 0
fn=_int_malloc
0 30
fn=__libc_memmove_ifunc
0 3
fn=drv__register_driver
0 2
fn=__trunc_ifunc
0 1
fn=(below main)'2
0 1
fn=0x00000000002a57b0
0 1
"""


def generate():
    with tempfile.TemporaryDirectory() as d:
        m, cg = os.path.join(d, "map"), os.path.join(d, "cg.1")
        with open(m, "w") as f:
            f.write(MAP)
        with open(cg, "w") as f:
            f.write(CALLGRIND)
        out = subprocess.run([sys.executable, SCRIPT, m, cg], capture_output=True, text=True, check=True)
    return out.stdout, out.stderr


class StartOrder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.script, cls.report = generate()
        text = cls.script.split("INSERT BEFORE .text;")[0]
        cls.text = [line.strip() for line in text.splitlines() if line.startswith("    ")]

    def test_rust_function_by_section_without_its_hash(self):
        # A hash from another build (the callgrind run's) still finds the section.
        self.assertIn("*(.text._ZN9nccl_wrap6detect7devices6detect17h*)", self.text)

    def test_cold_function_and_v0_crate_disambiguator(self):
        self.assertIn("*(.text.unlikely._RNvMs4_NtCs*_5alloc7raw_vecNtB5_11RawVecInner11finish_growB7_)", self.text)

    def test_c_function_by_archive_member(self):
        self.assertIn("*/libc.a:malloc.o(.text)", self.text)
        # A versioned archive matches any version.
        self.assertIn("*/libm-*.a:s_trunc.o(.text)", self.text)

    def test_every_member_defining_a_static_name(self):
        # Each rdma-core provider's constructor is `drv__register_driver`; all ran.
        self.assertIn("*/libnccl_wrap-*.rlib:mlx5.c.o(.text.startup)", self.text)
        self.assertIn("*/libnccl_wrap-*.rlib:rxe.c.o(.text.startup)", self.text)

    def test_every_cpu_variant_of_a_string_function(self):
        # Only the selector ran under callgrind; the host's CPU may pick the EVEX variant.
        self.assertIn("*/libc.a:memmove.o(.text) */libc.a:memmove-*.o(.text .text.*)", self.text)

    def test_what_callgrind_cannot_see(self):
        self.assertIn("*/libc.a:execve.o(.text)", self.text)

    def test_data_sections_are_not_code(self):
        self.assertNotIn("*/libc.a:malloc.o(.data)", self.script)

    def test_callgrind_names_of_no_function(self):
        self.assertNotIn("below main", self.script)
        self.assertNotIn("0x00000000002a57b0", self.script)
        # The vDSO set-up functions are not in this map: reported, not invented.
        self.assertIn("_dl_new_object", self.report)

    def test_in_the_order_the_linker_laid_them_out(self):
        order = [
            "*(.text.unlikely._RNvMs4_NtCs*_5alloc7raw_vecNtB5_11RawVecInner11finish_growB7_)",
            "*(.text._ZN9nccl_wrap6detect7devices6detect17h*)",
            "*/libnccl_wrap-*.rlib:mlx5.c.o(.text.startup)",
            "*/libm-*.a:s_trunc.o(.text)",
            "*/libc.a:memmove.o(.text) */libc.a:memmove-*.o(.text .text.*)",
            "*/libc.a:malloc.o(.text)",
            "*/libc.a:execve.o(.text)",
        ]
        self.assertEqual([p for p in self.text if p in order], order)

    def test_well_formed_script(self):
        self.assertEqual(self.script.count("SECTIONS {"), 2)
        self.assertIn("} INSERT BEFORE .text;", self.script)
        self.assertIn("} INSERT BEFORE .rodata;", self.script)
        self.assertEqual(len(self.text), len(set(self.text)))


if __name__ == "__main__":
    unittest.main()
