"""A three-question session over examples/incidents.md, offline.

The model is scripted (the replies a model would write), so this runs anywhere and shows
what a session keeps between questions: the second and third questions use variables the
first two left (``march``, ``april``), and the third calls a program's own tool. Pass a real
model name instead (``python examples/session_demo.py local:qwen2.5-coder-1.5b``) to ask it.

    python examples/session_demo.py [MODEL]
    rlm trace show /tmp/rlm-session-demo.jsonl      # (in $TMPDIR)
"""

import sys
import tempfile
from pathlib import Path

from rlm_runtime import Session
from rlm_runtime.llm import ScriptedClient

HERE = Path(__file__).parent


def fx_rate(currency: str) -> float:
    """Euros per unit of a currency, today."""
    return {"USD": 0.92, "GBP": 1.17}[currency]


SCRIPT = [
    "```python\nmarch = grep('2026-03')\nprint(march)\n```",
    "```python\nFINAL([m.line.split()[2] for m in march])\n```",
    "```python\napril = grep('2026-04')\nFINAL([m.line.split()[2] for m in april])\n```",
    "```python\nimport re\nusd = sum(int(x.replace(',', '')) for x in re.findall(r'USD ([\\d,]+)', str(april)))\n"
    "FINAL(round(usd * fx_rate('USD'), 2))\n```",
]

model = sys.argv[1] if len(sys.argv) > 1 else ScriptedClient(SCRIPT)
with Session(model, contexts=[HERE / "incidents.md"], tools=[fx_rate], trace=Path(tempfile.gettempdir()) / "rlm-session-demo.jsonl") as s:
    print(s.ask("Which incidents were reported in March?").answer)
    print(s.ask("And in April?").answer)
    print(s.ask("What did April's refunds cost in euros?").answer)
    print(s.usage()["totals"], s.trajectory)
