"""The dashboard (docs/dashboard.md) in a real browser: Debian's Chromium driven by Playwright,
against a real `pqs serve`. An admin signs in, sees a queue with its numbers, peeks (nothing is
received), sends a test message and sees the numbers move, pauses the live refresh, redrives one
group of a FIFO dead-letter queue, opens a dead-letter queue and redrives it, then one source
queue's dead letters, each after a confirmation that says how many will move, then reads the
history of what finished; a key that may only receive sees no action at all. Every wait is on an
element or an answer, never a sleep. Screenshots of each page go to the test's tmp_path
(PQS_DASHBOARD_IMAGES: a directory to copy the queues and queue pages to, for the README's
docs/img)."""

from __future__ import annotations

import os
import re
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


def dead_letter(service: Service, admin: str, queue: str, count: int) -> None:
    """`count` messages sent to `queue` (whose max_receive_count is 1) and moved to its dead-letter
    queue: received once with no visibility timeout, the next receive moves them."""
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as http:
        for n in range(count):
            assert http.post(f"/v1/queues/{queue}/messages", json={"body": {queue: n}}).status_code == 201
        receive = {"wait_seconds": 0, "max_messages": 10, "visibility_timeout": 0}
        assert len(http.post(f"/v1/queues/{queue}/messages/receive", json=receive).json()["messages"]) == count
        assert http.post(f"/v1/queues/{queue}/messages/receive", json=receive).json()["messages"] == []


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
        # The dead-letter queue: set, then removed by an empty name.
        await page.get_by_label("Dead-letter queue (empty: none)").fill("payments-dlq")
        await page.get_by_label("Receives before it moves there").fill("3")
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator("#edit-result")).to_have_text("Saved: dead_letter.")
        await expect(page.locator("#attributes")).to_contain_text("payments-dlq after 3 receives")
        await page.get_by_label("Dead-letter queue (empty: none)").fill("")
        await page.get_by_role("button", name="Save").click()
        await expect(page.locator("#edit-result")).to_have_text("Saved: dead_letter.")
        await expect(page.locator("#attributes")).not_to_contain_text("payments-dlq")
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

        # One source queue's dead letters: `refunds` names payments-dlq too, and two of its
        # messages and one of payments' are dead-lettered. The source field offers the queues
        # that name the DLQ; the confirmation counts refunds' two (the redrive's dry run), and
        # only they go back, to refunds.
        with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {admin}"}) as http:
            dead_letter_policy = {"dead_letter": {"queue": "payments-dlq", "max_receive_count": 1}}
            assert http.put("/v1/queues/refunds", json=dead_letter_policy).status_code == 201
        dead_letter(service, admin, "refunds", 2)
        dead_letter(service, admin, "payments", 1)
        await page.goto(service.url + "/ui#/dlq/payments-dlq")
        await expect(stat(page, "visible")).to_have_text("3")
        choices = page.locator("#redrive-sources option")
        await expect(choices).to_have_count(2)
        assert await choices.evaluate_all("options => options.map((o) => o.value)") == ["payments", "refunds"]
        await page.get_by_label("Redrive one source: queue name").fill("refunds")
        await page.get_by_role("button", name="Redrive source…").click()
        await expect(dialog).to_contain_text("Move 2 messages from refunds back to refunds")
        await page.screenshot(path=shots / "redrive-source-confirmation.png")
        await dialog.get_by_role("button", name="Redrive 2").click()
        await expect(page.locator("#message")).to_contain_text("Redrove 2 messages from refunds")
        await expect(stat(page, "visible")).to_have_text("1")
        await expect(page.locator("#peek tbody tr td").last).to_have_text("payments")
        async with httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {admin}"}) as http:
            assert (await http.get("/v1/queues/refunds")).json()["stats"]["visible"] == 2
            assert (await http.get("/v1/queues/payments")).json()["stats"]["visible"] == 0

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
            buttons = ("Redrive…", "Redrive group…", "Redrive source…", "Purge…", "Send", "Pause", "Change attributes")
            for name in (*buttons, "Show"):
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


# -- The activity charts and a FIFO queue's groups (issue 22) -----------------------------------


def stage_activity(service: Service, admin: str) -> None:
    """`orders`: three sent, two of them received and acked. `jobs.fifo`: groups `small` (one
    message, sent first), `big` (four), `mid` (two); `small` held by a receive."""
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30) as http:

        def ok(response: httpx.Response) -> Any:
            assert response.is_success, response.text
            return response.json() if response.content else None

        ok(http.put("/v1/queues/orders"))
        for n in range(3):
            ok(http.post("/v1/queues/orders/messages", json={"body": {"order": n}}))
        got = ok(http.post("/v1/queues/orders/messages/receive", json={"max_messages": 2, "wait_seconds": 0}))
        entries = [{"id": f"e{i}", "receipt_handle": m["receipt_handle"]} for i, m in enumerate(got["messages"])]
        assert len(entries) == 2 and ok(http.post("/v1/queues/orders/messages/ack", json={"entries": entries}))
        ok(http.put("/v1/queues/jobs.fifo", json={"fifo": True, "content_based_deduplication": True}))
        for group, count in (("small", 1), ("big", 4), ("mid", 2)):
            for n in range(count):
                ok(http.post("/v1/queues/jobs.fifo/messages", json={"body": f"{group}-{n}", "group_id": group}))
        held = ok(http.post("/v1/queues/jobs.fifo/messages/receive", json={"max_messages": 1, "wait_seconds": 0}))
        assert [m["group_id"] for m in held["messages"]] == ["small"]


async def test_an_admin_sees_each_queues_last_hour_and_a_fifo_queues_groups(
    db_url: str, tmp_path: Path, browser: Browser
) -> None:
    _, admin = await on_connection(db_url, lambda conn: create_key(conn, "admin", EVERYTHING))
    # This process leads maintenance and counts every queue often: the depth and the census.
    env = {"PQS_MAINTENANCE_ENABLED": "true", "PQS_METRICS_INTERVAL_SECONDS": "0.5"}
    with pqs_serve(db_url, tmp_path / "serve.log", PQS_DATA_DIR=str(tmp_path), **env) as service:
        stage_activity(service, admin)
        for viewport in (LAPTOP, PHONE):
            context = await browser.new_context(viewport=viewport)
            context.set_default_timeout(TIMEOUT_MS)
            page = await context.new_page()
            errors = watch(page)
            await sign_in(page, service.url, admin)

            # The queues page: each queue's sparkline, named by its figures.
            spark = page.locator('#queues tr[data-queue="orders"] [data-stat="last-hour"] .spark')
            await expect(spark).to_have_attribute("data-sent", "3")
            await expect(spark).to_have_attribute("data-acked", "2")
            await expect(spark.get_by_role("img")).to_have_attribute("aria-label", "Last 60 minutes: 3 sent, 2 acked")
            await expect(spark.locator('path[data-series="sent"]')).not_to_have_count(0)
            await page.screenshot(path=tmp_path / f"queues-{viewport['width']}.png", full_page=True)
            await assert_contrast(page)

            # A queue: its throughput and age charts, each with its figures in words.
            await page.goto(service.url + "/ui#/queue/orders")
            throughput = page.locator("#chart-throughput")
            await expect(throughput.get_by_role("img")).to_have_accessible_name(
                re.compile(r"^Over the last 60 minutes: 3 sent, 2 acked, 0 dead-lettered")
            )
            await expect(throughput.locator('path[data-series="acked"]')).not_to_have_count(0)
            await expect(page.locator("#chart-age-text")).to_contain_text("at the latest count")
            await expect(page.locator("#chart-age path")).not_to_have_count(0)
            await expect(page.locator("#groups")).to_have_count(0)  # a standard queue has none
            await assert_contrast(page)

            # A FIFO queue's groups: the census's largest and oldest, and the one held now.
            await page.goto(service.url + "/ui#/queue/jobs.fifo")
            largest = page.locator("#groups-largest tbody th")
            await expect(largest).to_have_text(["big", "mid", "small"])
            await expect(page.locator('#groups-largest [data-field="messages"]')).to_have_text(["4", "2", "1"])
            await expect(page.locator("#groups-oldest tbody th")).to_have_text(["small", "big", "mid"])
            await expect(page.locator("#groups-oldest tbody tr").first).to_contain_text("in flight")
            await expect(page.locator("#groups-in-flight tbody th")).to_have_text(["small"])
            await expect(page.locator("#groups-counted")).to_contain_text("3 groups held messages")
            await page.screenshot(path=tmp_path / f"groups-{viewport['width']}.png", full_page=True)
            await assert_contrast(page)
            assert await page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
            assert errors == []
            await context.close()


# -- the keys page and a read-only key (issue 22) ---------------------------------------------------


async def assert_no_action(page: Page) -> None:
    """Nothing on the page changes anything: no action button, no form that sends or edits."""
    await expect(page.locator("main [data-action]")).to_have_count(0)
    for name in ("Redrive…", "Purge…", "Send", "Change attributes", "Revoke…", "Make the key"):
        await expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)


async def test_an_admin_makes_a_read_key_that_sees_numbers_and_no_action_then_revokes_it(
    db_url: str, tmp_path: Path, browser: Browser
) -> None:
    _, admin = await on_connection(db_url, lambda conn: create_key(conn, "admin", EVERYTHING))
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
        await sign_in(page, service.url, admin)
        admin_id = admin.split("_")[1]

        # The keys page: the admin's own key, which it may not revoke.
        await page.get_by_role("link", name="Keys").click()
        await expect(page.locator("main h1")).to_have_text("Keys")
        own = page.locator(f'#keys tr[data-key="{admin_id}"]')
        await expect(own).to_contain_text("this key")
        await expect(own.get_by_role("button", name="Revoke…")).to_have_count(0)

        # Make a read key: shown once, in the page only.
        await page.get_by_label("Name (who or what uses it)").fill("on-call")
        await page.get_by_label("Queues (a name, or a glob: *, ?, [...])").fill("*")
        await page.get_by_label("read (look: counts, attributes, peek)").check()
        await page.get_by_role("button", name="Make the key").click()
        shown = page.locator("#new-key")
        await expect(shown).to_contain_text("Copy it now")
        reader = await page.locator("#new-key-value").input_value()
        reader_id = reader.split("_")[1]
        assert reader.startswith("pqs_") and len(await page.locator("#new-key-sqs-secret").input_value()) > 20
        await expect(page.locator(f'#keys tr[data-key="{reader_id}"]')).to_contain_text("read")
        await page.screenshot(path=shots / "keys.png", full_page=True)
        await assert_contrast(page)
        assert await page.evaluate("sessionStorage.length") == 1
        assert await page.evaluate("sessionStorage.getItem('pqs.key')") == admin
        assert await page.evaluate("localStorage.length") == 0
        assert reader not in page.url and not [url for url in requests if reader_id in url]

        # A grant wider than... nothing is wider than `*:*`; but an empty grant is refused here.
        await page.get_by_label("Name (who or what uses it)").fill("nothing")
        await page.get_by_role("button", name="Make the key").click()
        await expect(page.locator("#create-result [role=alert]")).to_contain_text("at least one action")

        # Signed in with the read key: the numbers, the peek, no action on any page, no keys page.
        await page.get_by_role("button", name="Sign out").click()
        await sign_in(page, service.url, reader)
        await expect(page.get_by_role("link", name="Keys")).to_be_hidden()
        orders = page.locator('#queues tr[data-queue="orders"]')
        await expect(orders.locator('[data-stat="visible"]')).to_have_text("3")
        await expect(page.locator('[data-dlq-count="payments-dlq"]')).to_have_text("1")
        await assert_no_action(page)
        await page.screenshot(path=shots / "read-key-queues.png", full_page=True)
        await orders.get_by_role("link", name="orders").click()
        await expect(stat(page, "visible")).to_have_text("3")
        await expect(page.locator("#peek tbody tr")).to_have_count(3)
        await expect(page.locator("#attributes")).to_contain_text("Visibility timeout")
        await assert_no_action(page)
        await page.screenshot(path=shots / "read-key-queue.png", full_page=True)
        await assert_contrast(page)
        await page.goto(service.url + "/ui#/dlq/payments-dlq")
        await expect(page.locator("main h1")).to_have_text("Dead letters: payments-dlq")
        await expect(page.locator("#peek tbody tr")).to_have_count(1)
        await expect(page.locator('#peek [data-field="last_error"]')).to_contain_text("card declined")
        await assert_no_action(page)
        await page.goto(service.url + "/ui#/keys")
        await expect(page.locator("main")).to_contain_text("This key may not manage keys")
        await expect(page.locator("#keys")).to_have_count(0)
        await assert_no_action(page)
        assert errors == []

        # The admin revokes it, after a confirmation that a cancel leaves as it was.
        await page.get_by_role("button", name="Sign out").click()
        await sign_in(page, service.url, admin)
        await page.goto(service.url + "/ui#/keys")
        row = page.locator(f'#keys tr[data-key="{reader_id}"]')
        await row.get_by_role("button", name="Revoke…").click()
        dialog = page.get_by_role("dialog")
        await expect(dialog).to_contain_text(f"Requests with key {reader_id} (on-call) are refused")
        await dialog.get_by_role("button", name="Cancel").click()
        await expect(row.locator('[data-field="status"]')).to_have_text("active")
        await row.get_by_role("button", name="Revoke…").click()
        await dialog.get_by_role("button", name=f"Revoke {reader_id}").click()
        await expect(page.locator("#message")).to_contain_text(f"Revoked key {reader_id}")
        await expect(row.locator('[data-field="status"]')).to_contain_text("revoked")
        await expect(row.get_by_role("button", name="Revoke…")).to_have_count(0)
        async with httpx.AsyncClient(base_url=service.url, headers={"Authorization": f"Bearer {reader}"}) as http:
            assert (await http.get("/v1/keys/self")).status_code == 401
        assert errors == []
        await context.close()

        # The keys page on a phone: it fits the width (the table scrolls in its own box).
        phone = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
        phone.set_default_timeout(TIMEOUT_MS)
        page = await phone.new_page()
        errors = watch(page)
        await sign_in(page, service.url, admin)
        await page.goto(service.url + "/ui#/keys")
        await expect(page.locator(f'#keys tr[data-key="{reader_id}"]')).to_contain_text("revoked")
        assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        await page.screenshot(path=shots / "keys-phone.png", full_page=True)
        await assert_contrast(page)
        assert errors == []
        await phone.close()

    assert (shots / "keys.png").stat().st_size > 0
    images = os.environ.get("PQS_DASHBOARD_IMAGES")
    if images:
        shutil.copyfile(shots / "keys.png", Path(images) / "keys.png")
