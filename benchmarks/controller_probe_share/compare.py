import json, sys
from pathlib import Path
R="shared_both_T3pct_until0.5_hz0.1_min0.3_up2_agreemean_floor_ls4_fan0.1_ties_mr4"
P=R+"_pw0.33"
best={"bp":0.03,"a":0.01,"d":0.003,"e":0.01,"f":0.01,"h":0.01,"c":0.0003,"g":0.0003,"i":0.003}
for d in sorted(Path(__file__).resolve().parent.iterdir()):
    if not d.is_dir() or not (d/"results.jsonl").exists() or d.name.startswith("check"): continue
    rows={json.loads(l)["name"]:json.loads(l) for l in open(d/"results.jsonl")}
    b=best[d.name.rstrip("0123456789")]
    ddp=[r for r in rows.values() if r["kind"]=="ddp" and abs(r["start_lr"]-b)/b<1e-6]
    if not ddp: print(d.name,"no ddp best"); continue
    ref=ddp[0]["eval_loss"]
    out=[]
    for s in ("best","low","high"):
        p=rows.get(f"{P}_{s}"); q=rows.get(f"{R}_{s}")
        f=lambda r: f"{r['eval_loss']/ref:.4f}(lr {r.get('final_lr') or 0:.3g})" if r else "-"
        out.append(f"{s}: pw {f(p)} base {f(q)}")
    print(d.name, " | ".join(out))
