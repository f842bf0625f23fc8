"""The share page's Markdown renderer on its own (the browser tests drive the whole page)."""

from __future__ import annotations

import pytest

from uhp_server.doors.uhp.share_page.render import markdown

REL = 'rel="nofollow noopener noreferrer"'


@pytest.mark.parametrize(
    ("source", "href", "text"),
    [
        ("[docs](https://example.com/a?b=1)", "https://example.com/a?b=1", "docs"),
        ("<https://example.com/auto>", "https://example.com/auto", "https://example.com/auto"),
        ("[plain](http://example.com)", "http://example.com", "plain"),
        ("<mailto:a@example.com>", "mailto:a@example.com", "mailto:a@example.com"),
    ],
)
def test_links_render_with_rel_and_their_href(source: str, href: str, text: str) -> None:
    assert str(markdown(source)) == f'<p><a href="{href}" {REL}>{text}</a></p>\n'


@pytest.mark.parametrize(
    "source",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](data:text/html,hi)",
        "[x](vbscript:x)",
        "[x](report.md)",
        "[x](/v1/uhp)",
        "[x](#top)",
        "[x](//evil.example/)",
    ],
)
def test_links_to_anything_but_http_or_mailto_stay_text(source: str) -> None:
    assert "<a" not in str(markdown(source))


def test_images_and_raw_html_never_become_elements() -> None:
    html = str(markdown('![t](https://example.com/p.png) <img src=x onerror="y"> <b>b</b>'))
    assert "<img" not in html and "<b>" not in html
    assert "&lt;img src=x" in html


def test_an_image_is_a_plain_link_labelled_with_its_alt_text() -> None:
    html = str(markdown("see ![a <b>chart</b>](https://example.com/p.png) here"))
    expected = f'<a href="https://example.com/p.png" {REL}>a &lt;b&gt;chart&lt;/b&gt;</a>'
    assert f"<p>see {expected} here</p>" in html
    assert "!" not in html and "<img" not in html


def test_an_image_to_anything_but_http_stays_text() -> None:
    assert "<a" not in str(markdown("![x](javascript:alert(1)) ![y](/v1/uhp)"))
