"""The chain settling (assist ``chain_answer``): when the runtime followed a chain from the
question's names, the last turn, and a middle link given again as the answer, are settled
by one short call holding only the chain's lines and the question, not the whole
conversation.
"""

from __future__ import annotations

from rlm_runtime import harness
from rlm_runtime.assist.base import Assist, AssistState, Host
from rlm_runtime.assist.leads import CHAIN_LINES_SHOWN


class ChainAnswer(Assist):
    """After turns that repeated themselves, small models answered the conversation's last
    turn with a line of the first step; asked with the few lines, they follow them. The
    1.5B also named the second person of a chain twice when asked where that person is
    based. (An answer read on a line about another name and given again is taken: the note
    invites that, and the line may say "it".)"""

    name = "chain_answer"

    def last_turn(self, host: Host, state: AssistState) -> str | None:
        return _chain_answer(host, state) if state.chain_lines else None

    def last_found(self, host: Host, state: AssistState) -> str:
        # The question again, and the chain the runtime followed: after a run of turns that
        # repeated themselves, small models answer with a line of the first step.
        if not state.chain_lines:
            return ""
        return host.prompts.text("force_found", lines="\n".join(state.chain_lines[-CHAIN_LINES_SHOWN:]))

    def settle(self, host: Host, state: AssistState, answer: str) -> str:
        term = harness.answer_to_follow(answer, host.query)
        if term is None or term.lower() not in state.middles or term.lower() not in state.followed:
            return answer
        return _chain_answer(host, state) or answer


def _chain_answer(host: Host, state: AssistState) -> str | None:
    lines = "\n".join(state.chain_lines[-CHAIN_LINES_SHOWN:])
    return harness.short_answer(host.ask(host.prompts.text("chain_answer", lines=lines, question=host.query), "the chain's lines").strip())
