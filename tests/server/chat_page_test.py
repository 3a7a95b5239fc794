#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The chat page at GET /, without a browser: it is served without the API key (which every API
endpoint still requires, /health excepted) as UTF-8 HTML, with a Content-Security-Policy whose
hashes are those of the page's own inline script (its script files put in at build time) and
style and which allows nothing from elsewhere, with an ETag that a revalidation is answered 304
for, and the page refers to no external URL. Run by ctest (server_chat_page_test); exits non-zero
on the first failure."""

import base64
import hashlib
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, make_model  # noqa: E402

KEY = "page-test-key"


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def inline_hash(page, tag):
    """The CSP source a browser would match the page's one <tag> element against."""
    check(page.count(f"<{tag}>") == 1 and page.count(f"</{tag}>") == 1, f"the page needs one <{tag}>")
    text = page[page.index(f"<{tag}>") + len(tag) + 2:page.index(f"</{tag}>")]
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def check_page(server):
    status, headers, body = server.request("GET", "/")
    check(status == 200, f"GET / -> {status} {body[:200]!r}")
    check(headers.get("Content-Type") == "text/html; charset=utf-8", f"Content-Type {headers}")
    check(headers.get("X-Content-Type-Options") == "nosniff", f"headers {headers}")
    check(headers.get("Cache-Control") == "no-cache", f"Cache-Control {headers}")
    page = body.decode("utf-8")
    check(page.startswith("<!DOCTYPE html>") and "</html>" in page, "not a whole HTML page")
    check(int(headers["Content-Length"]) == len(body), "Content-Length")

    # The page refers to nothing outside itself: no URL, no src or href attribute at all.
    check(not re.search(r"https?://", page), "the page names an external URL")
    check(not re.search(r"\b(src|href)\s*=", page, re.I), "the page loads something by src/href")
    check("innerHTML" not in page and "outerHTML" not in page, "the page writes HTML from strings")
    # Its scripts were put into its one script element at build time.
    check("//@inline" not in page and "const markdown = " in page and "function turn(" in page,
          "the page's script files were not inlined")

    policy = {}
    for directive in headers["Content-Security-Policy"].split(";"):
        name, *sources = directive.split()
        policy[name] = sources
    check(policy.get("default-src") == ["'none'"], f"CSP {policy}")
    check(policy.get("script-src") == [inline_hash(page, "script")], f"CSP script-src {policy}")
    check(policy.get("style-src") == [inline_hash(page, "style")], f"CSP style-src {policy}")
    check(policy.get("connect-src") == ["'self'"], f"CSP connect-src {policy}")
    check(policy.get("frame-ancestors") == ["'none'"] and policy.get("form-action") == ["'none'"], f"CSP {policy}")

    # A revalidation with the page's ETag is answered 304 with no body; another ETag gets the page.
    etag = headers["ETag"]
    check(re.fullmatch(r'"[0-9a-f]{32}"', etag), f"ETag {etag}")
    status, _, body304 = server.request("GET", "/", headers={"If-None-Match": etag})
    check(status == 304 and body304 == b"", f"revalidation -> {status} {body304[:80]!r}")
    status, _, again = server.request("GET", "/", headers={"If-None-Match": '"0123"'})
    check(status == 200 and again == body, f"a stale ETag -> {status}")
    status, head_headers, head_body = server.request("HEAD", "/")
    check(status == 200 and head_body == b"" and head_headers.get("ETag") == etag, f"HEAD / -> {status}")
    return page


def main():
    model = make_model(os.path.join(tempfile.mkdtemp(prefix="mambacpp_chat_page_"), "model"))
    with Server(model) as server:
        page = check_page(server)
        status, _, _ = server.request("GET", "/v1/models")
        check(status == 200, "/v1/models without a key on a server without one")

    with Server(model, "--api-key", KEY) as server:
        check(check_page(server) == page, "the page differs with a key")
        auth = {"Authorization": "Bearer " + KEY}
        # Only GET and HEAD of / are open; the API keeps its key, and /health stays open.
        for method, path, expected in [("GET", "/health", 200), ("GET", "/v1/models", 401),
                                       ("POST", "/v1/chat/completions", 401), ("GET", "/metrics", 401),
                                       ("POST", "/", 401), ("GET", "/index.html", 401), ("GET", "//", 401)]:
            status, headers, body = server.request(method, path, b"{}" if method == "POST" else None)
            check(status == expected, f"{method} {path} without the key -> {status}, expected {expected}")
            if expected == 401:
                check(headers.get("WWW-Authenticate") == "Bearer", f"{method} {path}: {headers}")
        status, _, _ = server.request("GET", "/v1/models", headers=auth)
        check(status == 200, "/v1/models with the key")
    print("chat page test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
