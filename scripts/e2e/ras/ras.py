"""Tiny RAS client for captures: sends lines, reads until close, a byte cap or a deadline."""
import json, socket, sys, time
def query(lines, port=28028, host="127.0.0.1", connect_s=2.0, read_s=8.0, cap=4 << 20):
    t0 = time.monotonic(); rec = {"sent": lines, "t": time.time()}
    try:
        s = socket.create_connection((host, port), timeout=connect_s)
    except Exception as e:
        rec.update(error=f"connect: {e!r}", ms=round((time.monotonic()-t0)*1e3, 2)); return rec
    rec["connect_ms"] = round((time.monotonic()-t0)*1e3, 2)
    data = b""; firstbyte = None
    try:
        s.sendall("".join(l + "\n" for l in lines).encode())
        s.settimeout(0.2)
        deadline = time.monotonic() + read_s
        while time.monotonic() < deadline and len(data) < cap:
            try:
                b = s.recv(65536)
            except socket.timeout:
                continue
            if not b:
                rec["closed"] = True; break
            if firstbyte is None: firstbyte = time.monotonic()
            data += b
        else:
            rec["closed"] = False
    except Exception as e:
        rec["error"] = repr(e)
    finally:
        s.close()
    rec["ms"] = round((time.monotonic()-t0)*1e3, 2)
    if firstbyte: rec["first_byte_ms"] = round((firstbyte-t0)*1e3, 2)
    rec["bytes"] = len(data); rec["reply"] = data.decode("utf-8", "replace")
    return rec
SETS = {
  "status": ["CLIENT PROTOCOL 2", "STATUS"],
  "verbose": ["CLIENT PROTOCOL 2", "VERBOSE STATUS"],
  "json_status": ["CLIENT PROTOCOL 2", "SET FORMAT json", "STATUS"],
  "json_verbose": ["CLIENT PROTOCOL 2", "SET FORMAT json", "VERBOSE STATUS"],
}
EXTRA = {
  "unknown": ["CLIENT PROTOCOL 2", "FROBNICATE"],
  "proto1": ["CLIENT PROTOCOL 1", "STATUS"],
  "proto3": ["CLIENT PROTOCOL 3", "STATUS"],
  "noproto": ["STATUS"],
  "monitor": ["CLIENT PROTOCOL 2", "MONITOR"],
  "json_unknown": ["CLIENT PROTOCOL 2", "SET FORMAT json", "FROBNICATE"],
  "format_bogus": ["CLIENT PROTOCOL 2", "SET FORMAT yaml", "STATUS"],
  "timeout_cmd": ["CLIENT PROTOCOL 2", "SET TIMEOUT 1", "STATUS"],
}
if __name__ == "__main__":
    tag, which, outf = sys.argv[1], sys.argv[2], sys.argv[3]
    read_s = float(sys.argv[4]) if len(sys.argv) > 4 else 8.0
    sets = dict(SETS) if which == "basic" else (dict(SETS, **EXTRA) if which == "all" else {which: SETS.get(which) or EXTRA[which]})
    import concurrent.futures as cf
    par = which == "basic"
    with open(outf, "a") as f, cf.ThreadPoolExecutor(len(sets) if par else 1) as ex:
        futs = [(name, ex.submit(query, lines, read_s=read_s)) for name, lines in sets.items()]
        for name, fu in futs:
            r = fu.result(); r["tag"] = tag; r["name"] = name
            f.write(json.dumps(r) + "\n"); f.flush()
            print(tag, name, r.get("ms"), r.get("bytes"), r.get("closed"), r.get("error", ""), flush=True)
