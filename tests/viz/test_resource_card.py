"""The verdict card shows the real run's workers' resource: the same fact the text says,
in a row of its own, escaped once; a pair without workers shows no such row."""

from __future__ import annotations

import html

import pytest

from loadeval_nb import diagnose
from loadeval_nb.viz import verdict_html
from tests.core.verdict.test_verdict_resource import READINGS, pair


@pytest.mark.parametrize("kind", sorted(READINGS))
def test_the_card_shows_the_workers_resource_as_the_text_says_it(kind):
    d = diagnose(*pair(30.0, 20.0, READINGS[kind]()))
    fact = next(f for f in d.facts().facts if f.key == "resource")
    card = verdict_html(d)
    row = card.split("<tr class='loadeval-resource'>")[1].split("</tr>")[0]
    assert html.escape("The real run's workers") in row
    assert html.escape(fact.text) in row  # the text's words, escaped once
    advice = card.split("<tr class='loadeval-advice'>")[1].split("</tr>")[0]
    assert html.escape(d.worker_resource.headline()) in advice


def test_a_pair_without_workers_has_no_resource_row():
    card = verdict_html(diagnose(*pair(30.0, 20.0, None, workers=0)))
    assert "loadeval-resource" not in card and "loadeval-advice" in card
