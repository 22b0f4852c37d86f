"""The dashboard (docs/dashboard.md) in a real browser: Debian's Chromium driven by Playwright,
against a real `pqs serve`. An admin signs in, sees a queue with its numbers, peeks (nothing is
received), sends a test message and sees the numbers move, pauses the live refresh, redrives one
group of a FIFO dead-letter queue, opens a dead-letter queue and redrives it, each after a
confirmation that says how many will move, then reads the history of what finished; a key that
may only receive sees no action at all. Every wait is on an element or an answer, never a
sleep. Screenshots of each page go to the test's tmp_path (PQS_DASHBOARD_IMAGES: a directory to
copy the queues and queue pages to, for the README's docs/img)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright, expect

from app.access import EVERYTHING, parse_grant
from app.db.sessions import on_connection
from app.service.keys import create_key
from tests.faults.service import Service, pqs_serve

CHROMIUM = os.environ.get("PQS_CHROMIUM", "/usr/bin/chromium")
LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# Long enough for a loaded machine; Playwright's waits end as soon as the page gets there.
TIMEOUT_MS = 30_000


@pytest.fixture
def chromium() -> str:
    assert Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium package"
    return CHROMIUM


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Browser]:
    expect.set_options(timeout=TIMEOUT_MS)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium, headless=True)
        try:
            yield launched
        finally:
            await launched.close()


def stage(service: Service, admin: str) -> None:
    """`orders` with three messages, and one acked with a result; `bulk`, 21 purged; `jobs.fifo`,
    empty, whose dead-letter queue `jobs-dlq.fifo` holds three messages of groups a (two) and b
    (one); `payments`, whose dead-letter queue `payments-dlq` holds one message that failed with
    an error."""
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as http:

        def ok(response: httpx.Response) -> Any:
            assert response.is_success, response.text
            return response.json() if response.content else None

        ok(http.put("/v1/queues/payments-dlq"))
        ok(http.put("/v1/queues/payments", json={"dead_letter": {"queue": "payments-dlq", "max_receive_count": 1}}))
        ok(http.put("/v1/queues/orders"))
        ok(http.put("/v1/queues/jobs-dlq.fifo", json={"fifo": True}))
        dead_letter = {"queue": "jobs-dlq.fifo", "max_receive_count": 1}
        fifo = {"fifo": True, "content_based_deduplication": True, "dead_letter": dead_letter}
        ok(http.put("/v1/queues/jobs.fifo", json=fifo))
        for n, group in enumerate("aab"):
            ok(http.post("/v1/queues/jobs.fifo/messages", json={"body": {"job": n}, "group_id": group}))
        # Received once with no visibility timeout: the next receive moves them all to the DLQ.
        receive = {"wait_seconds": 0, "max_messages": 10, "visibility_timeout": 0}
        assert len(ok(http.post("/v1/queues/jobs.fifo/messages/receive", json=receive))["messages"]) == 3
        assert ok(http.post("/v1/queues/jobs.fifo/messages/receive", json=receive))["messages"] == []
        ok(http.post("/v1/queues/orders/messages", json={"body": {"order": "shipped"}}))
        [done] = ok(http.post("/v1/queues/orders/messages/receive", json={"wait_seconds": 0}))["messages"]
        entry = {"id": "a", "receipt_handle": done["receipt_handle"], "result": {"tracking": "T-1"}}
        assert ok(http.post("/v1/queues/orders/messages/ack", json={"entries": [entry]}))["failed"] == []
        for n in range(3):
            ok(http.post("/v1/queues/orders/messages", json={"body": {"order": n}}))
        # `bulk`: 21 messages purged, a history of more than one page.
        ok(http.put("/v1/queues/bulk"))
        entries = [{"id": f"e{n}", "body": n} for n in range(21)]
        assert ok(http.post("/v1/queues/bulk/messages/batch", json={"entries": entries}))["failed"] == []
        assert ok(http.post("/v1/queues/bulk/purge"))["count"] == 21
        ok(http.post("/v1/queues/payments/messages", json={"body": {"charge": 42}}))
        [held] = ok(http.post("/v1/queues/payments/messages/receive", json={"wait_seconds": 0}))["messages"]
        entry = {"id": "e", "receipt_handle": held["receipt_handle"], "error": {"why": "card declined"}}
        assert ok(http.post("/v1/queues/payments/messages/nack", json={"entries": [entry]}))["failed"] == []
        # Over max_receive_count: this receive moves it to the dead-letter queue.
        assert ok(http.post("/v1/queues/payments/messages/receive", json={"wait_seconds": 0}))["messages"] == []


def watch(page: Page) -> list[str]:
    """The page's console errors (a script error, a CSP violation, a failed load), to be none."""
    errors: list[str] = []

    def seen(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", seen)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


async def sign_in(page: Page, url: str, key: str) -> None:
    await page.goto(url + "/ui")
    await expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    await page.get_by_label("API key").fill(key)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Queues", level=1)).to_be_visible()
    await expect(page.get_by_role("button", name="Sign out")).to_be_visible()


# Each visible element's own text against the background it is drawn on (the nearest ancestor's
# with a colour): the WCAG contrast ratio, where it is under 4.5:1 (AA for text).
LOW_CONTRAST = """() => {
  const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgb(getComputedStyle(el).backgroundColor);
      if (c.length < 4 || c[3] > 0) return c;
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const el of document.querySelectorAll("body *")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.checkVisibility() || el.closest(".skip")) continue;
    const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(background(el))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push(el.tagName + " " + el.textContent.trim().slice(0, 30) + ": " + ratio.toFixed(2));
  }
  return low;
}"""


async def assert_contrast(page: Page) -> None:
    assert await page.evaluate(LOW_CONTRAST) == []


def stat(page: Page, name: str) -> Any:
    return page.locator(f'#stats [data-stat="{name}"]')


async def test_an_admin_watches_peeks_sends_and_redrives_and_a_reader_sees_no_action(
    db_url: str, tmp_path: Path, browser: Browser
) -> None:
    _, admin = await on_connection(db_url, lambda conn: create_key(conn, "admin", EVERYTHING))
    _, reader = await on_connection(db_url, lambda conn: create_key(conn, "reader", (parse_grant("*:receive"),)))
    shots = tmp_path / "screenshots"
    shots.mkdir()
    with pqs_serve(db_url, tmp_path / "serve.log", PQS_DATA_DIR=str(tmp_path)) as service:
        stage(service, admin)
        context = await browser.new_context(viewport=LAPTOP)
        context.set_default_timeout(TIMEOUT_MS)
        page = await context.new_page()
        errors = watch(page)
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))

        # A wrong key is refused, and stays on the sign-in form.
        await page.goto(service.url + "/ui")
        await expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
        await page.get_by_label("API key").fill("pqs_000000000000_" + "A" * 43)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("alert")).to_contain_text("Unknown or revoked API key")
        errors.clear()  # the browser logs the 401 it was answered

        await assert_contrast(page)

        # Queues: each with its kind and numbers, its DLQ with how many it holds. Signed in from
        # the keyboard: Tab reaches the button, whose focus ring shows.
        await page.get_by_label("API key").fill(admin)
        await page.keyboard.press("Tab")
        focused = page.locator(":focus")
        await expect(focused).to_have_text("Sign in")
        await expect(focused).to_have_css("outline-style", "solid")
        await expect(focused).to_have_css("outline-width", "3px")
        await page.keyboard.press("Enter")
        orders = page.locator('#queues tr[data-queue="orders"]')
        await expect(orders.locator('[data-stat="visible"]')).to_have_text("3")
        await expect(orders.locator("td").first).to_have_text("standard")
        payments = page.locator('#queues tr[data-queue="payments"]')
        await expect(payments.locator('[data-dlq-count="payments-dlq"]')).to_have_text("1")
        await page.screenshot(path=shots / "queues.png", full_page=True)
        await assert_contrast(page)
        assert await page.evaluate("sessionStorage.getItem('pqs.key')") == admin
        assert await page.evaluate("localStorage.length") == 0
        assert await page.evaluate("document.cookie") == ""

        # The prefix filter.
        await page.get_by_label("Filter by name prefix").fill("pay")
        await expect(orders).to_have_count(0)
        await expect(payments).to_be_visible()
        await page.get_by_label("Filter by name prefix").fill("")
        await expect(orders).to_be_visible()

        # A queue: its numbers, attributes, and a peek that receives nothing.
        await orders.get_by_role("link", name="orders").click()
        await expect(stat(page, "visible")).to_have_text("3")
        peeked = page.locator("#peek tbody tr")
        await expect(peeked).to_have_count(3)
        await expect(peeked.locator('[data-field="receive_count"]')).to_have_text(["0", "0", "0"])
        await expect(page.locator("#attributes")).to_contain_text("Visibility timeout")
        await page.screenshot(path=shots / "queue.png", full_page=True)
        await assert_contrast(page)

        # The skip link moves the focus to the page's content, and leaves the page as it is.
        await page.locator(".skip").focus()
        await page.keyboard.press("Enter")
        await expect(page.locator("main")).to_be_focused()
        await expect(page.locator("main h1")).to_have_text("Queue orders")

        # Change an attribute; a value out of bounds is the API's refusal, shown as it says it.
        await page.get_by_role("button", name="Change attributes").click()
        await expect(page.get_by_label("Visibility timeout (s)")).to_be_focused()
        await page.get_by_label("Visibility timeout (s)").fill("45")
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator("#edit-result")).to_have_text("Saved: visibility_timeout.")
        await expect(page.locator("#attributes")).to_contain_text("45 s")
        await page.get_by_label("Retention (s)").fill("1")
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator("#edit-result [role=alert]")).to_contain_text("retention_seconds")
        assert [error for error in errors if "400 (Bad Request)" not in error] == []
        errors.clear()  # the browser logs the 400 it was answered
        await page.get_by_role("button", name="Change attributes").click()
        await expect(page.locator("#edit")).to_have_count(0)

        # Send a test message: the numbers move.
        await page.get_by_label("Body (JSON)").fill('{"hello": "dashboard"}')
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.locator("#send-result")).to_contain_text("Sent: message")
        await expect(stat(page, "visible")).to_have_text("4")
        await expect(peeked).to_have_count(4)
        await expect(page.locator("#peek")).to_contain_text('{"hello":"dashboard"}')

        # Pause: the page says so, and a hidden tab pauses too; Resume reads the numbers again.
        await page.get_by_role("button", name="Pause").click()
        await expect(page.locator("#live-status")).to_contain_text("Paused")
        await expect(page.get_by_role("button", name="Resume")).to_have_attribute("aria-pressed", "true")
        async with httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {admin}"}) as http:
            assert (await http.post("/v1/queues/orders/messages", json={"body": 5})).status_code == 201
        await page.get_by_role("button", name="Resume").click()
        await expect(stat(page, "visible")).to_have_text("5")
        await page.evaluate(
            "Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        await expect(page.locator("#live-status")).to_contain_text("Paused (tab hidden)")
        await page.evaluate(
            "Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});"
            "document.dispatchEvent(new Event('visibilitychange'))"
        )
        await expect(page.locator("#live-status")).to_contain_text("Live")

        # A FIFO queue's send names the group; the peek shows it.
        await page.goto(service.url + "/ui#/queue/jobs.fifo")
        await expect(page.locator("#attributes")).to_contain_text("FIFO")
        await page.get_by_label("Group id").fill("user-17")
        await page.get_by_role("button", name="Send", exact=True).click()
        await expect(page.locator("#peek tbody tr")).to_have_count(1)
        await expect(page.locator("#peek tbody tr td").nth(1)).to_have_text("user-17")

        # A FIFO dead-letter queue: one group's messages go back, after a confirmation that
        # counts them; the other group's stay.
        await page.goto(service.url + "/ui#/dlq/jobs-dlq.fifo")
        await expect(stat(page, "visible")).to_have_text("3")
        await page.get_by_label("Redrive one group: group id").fill("a")
        await page.get_by_role("button", name="Redrive group…").click()
        dialog = page.get_by_role("dialog")
        await expect(dialog).to_contain_text("Move 2 messages of group a")
        await page.screenshot(path=shots / "redrive-group-confirmation.png")
        await dialog.get_by_role("button", name="Redrive 2").click()
        await expect(page.locator("#message")).to_contain_text("Redrove 2 messages of group a")
        await expect(stat(page, "visible")).to_have_text("1")
        await expect(page.locator("#peek tbody tr td").nth(1)).to_have_text("b")

        # Dead letters: the message, its receive count and last error; redrive after confirming.
        await page.get_by_role("link", name="Queues").click()
        await payments.get_by_role("link", name="payments-dlq").click()
        await expect(page.get_by_role("heading", level=1)).to_have_text("Dead letters: payments-dlq")
        dead = page.locator("#peek tbody tr")
        await expect(dead).to_have_count(1)
        await expect(dead.locator('[data-field="last_error"]')).to_contain_text("card declined")
        async with httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {admin}"}) as http:
            [api_peek] = (await http.get("/v1/queues/payments-dlq/messages")).json()["messages"]
        await expect(dead.locator('[data-field="receive_count"]')).to_have_text(str(api_peek["receive_count"]))
        await expect(dead).to_contain_text("payments")
        await page.screenshot(path=shots / "dead-letters.png", full_page=True)
        await assert_contrast(page)
        await page.get_by_role("button", name="Redrive…").click()
        await expect(dialog).to_contain_text("Move 1 message")
        await page.screenshot(path=shots / "redrive-confirmation.png")
        await dialog.get_by_role("button", name="Cancel").click()
        await expect(dialog).to_have_count(0)
        await expect(dead).to_have_count(1)  # cancelled: nothing moved
        await page.get_by_role("button", name="Redrive…").click()
        await dialog.get_by_role("button", name="Redrive 1").click()
        await expect(page.locator("#message")).to_contain_text("Redrove 1 messages")
        await expect(stat(page, "visible")).to_have_text("0")

        # Purge, after its own confirmation.
        await page.goto(service.url + "/ui#/queue/payments")
        await expect(stat(page, "visible")).to_have_text("1")
        await page.get_by_role("button", name="Purge…").click()
        await expect(dialog).to_contain_text("(1 now)")
        await dialog.get_by_role("button", name="Purge 1 messages").click()
        await expect(page.locator("#message")).to_contain_text("Purged 1 messages")
        await expect(stat(page, "visible")).to_have_text("0")

        # History, from the queue's page: the purge just done, newest first, then the dead letter
        # with its error; filtered by outcome. A FIFO queue's filtered by group; an ack's result.
        await page.get_by_role("link", name="History").click()
        await expect(page.locator("main h1")).to_have_text("History: payments")
        finished = page.locator("#history tbody tr")
        await expect(finished.locator('[data-field="outcome"]')).to_have_text(["purged", "dead-lettered"])
        await expect(finished.nth(1).locator('[data-field="error"]')).to_contain_text("card declined")
        await page.screenshot(path=shots / "history.png", full_page=True)
        await assert_contrast(page)
        await page.get_by_label("Outcome").select_option("dead_lettered")
        await page.get_by_role("button", name="Show").click()
        await expect(finished.locator('[data-field="outcome"]')).to_have_text(["dead-lettered"])
        await page.goto(service.url + "/ui#/history/jobs.fifo")
        await expect(finished).to_have_count(3)
        await page.get_by_label("Group id").fill("b")
        await page.get_by_role("button", name="Show").click()
        await expect(finished).to_have_count(1)
        await expect(finished.locator("td").nth(3)).to_have_text("b")
        await page.goto(service.url + "/ui#/history/orders")
        await expect(finished.locator('[data-field="result"]')).to_have_text(['{"tracking":"T-1"}'])
        await expect(page.get_by_role("button", name="Older")).to_be_hidden()
        # A page at a time: Older goes back, Newest returns.
        await page.goto(service.url + "/ui#/history/bulk")
        await expect(finished).to_have_count(20)
        await page.get_by_role("button", name="Older").click()
        await expect(finished).to_have_count(1)
        await expect(page.get_by_role("button", name="Older")).to_be_hidden()
        await page.get_by_role("button", name="Newest").click()
        await expect(finished).to_have_count(20)

        # The key went out in a header only: no address the page asked for holds it.
        assert requests and not [url for url in requests if admin in url or admin.split("_", 2)[2] in url]
        assert admin not in page.url
        assert errors == []

        # A key that may only receive: no queue list, no action anywhere.
        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
        assert await page.evaluate("sessionStorage.length") == 0
        await page.get_by_label("API key").fill(reader)
        await page.get_by_role("button", name="Sign in").click()
        await expect(page.get_by_role("status").first).to_contain_text("may not list queues")
        await expect(page.locator("main")).to_contain_text("receive")
        await page.screenshot(path=shots / "read-only.png", full_page=True)
        await assert_contrast(page)
        pages = {
            "#/queues": "Queues",
            "#/queue/orders": "Queue orders",
            "#/dlq/payments-dlq": "Dead letters: payments-dlq",
            "#/history/orders": "History: orders",
        }
        for target, heading in pages.items():
            await page.goto(service.url + "/ui" + target)
            await expect(page.locator("main h1")).to_have_text(heading)
            await expect(page.locator("main")).to_contain_text("This key may not")
            await expect(page.locator("main [data-action]")).to_have_count(0)
            for name in ("Redrive…", "Redrive group…", "Purge…", "Send", "Pause", "Change attributes", "Show"):
                await expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
        assert errors == []
        await context.close()

        # A phone: the queue page fits its width (tables scroll inside their own box).
        phone = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
        phone.set_default_timeout(TIMEOUT_MS)
        page = await phone.new_page()
        errors = watch(page)
        await sign_in(page, service.url, admin)
        await page.goto(service.url + "/ui#/queue/orders")
        await expect(stat(page, "visible")).to_have_text("5")
        await expect(page.locator("#peek tbody tr")).to_have_count(5)
        assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        await page.screenshot(path=shots / "queue-phone.png", full_page=True)
        await assert_contrast(page)
        assert errors == []
        await phone.close()

    for name in ("queues.png", "queue.png", "dead-letters.png", "history.png", "read-only.png", "queue-phone.png"):
        assert (shots / name).stat().st_size > 0, name
    images = os.environ.get("PQS_DASHBOARD_IMAGES")
    if images:
        for name in ("queues.png", "queue.png"):
            shutil.copyfile(shots / name, Path(images) / name)
