// The operators' console: what htmx does not do by itself. Every request the page makes is
// htmx's, to the operators' routes (the signed-in door); this file only
// - sends the page's token with every action (X-CSRF-Token: cosmos_outbox/_console/guard.py),
// - sends a form to a route that reads JSON as JSON (the extension "outbox-json"), with the
//   fields an answer wrote into the button (`data-json`: a selection, a continuation token),
// - leaves the empty fields of a search out of its URL,
// - asks before an action, in a dialog that says what subscribers will see (htmx:confirm);
//   a bulk action (a re-drive, a resubmit-all, a discard-all) shows its preview there first,
//   the preview route's answer: bad input is refused before anything is confirmed,
// - acts on the selected quarantine records one by one, and on the selected dead letters in
//   one call, through the same routes,
// - turns the journey's search (an event id, or an aggregate type and id) and the journey
//   links of the other panels into the journey's route, and into the page's URL (shareable;
//   Back returns to the previous search),
// - follows a re-drive's pages to the end when asked,
// - refreshes the lists when the relay's count of quarantined events changes or an action was
//   taken, and pauses the periodic refresh of a panel while an operator is choosing in it,
// - keeps a panel's last good state, marked stale, when its refresh fails, and asks again each
//   time the relay's state answers (every 10 s) until the mark clears.
(function () {
  "use strict";

  function token() {
    var meta = document.querySelector('meta[name="outbox-csrf"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // `body` with the fields of `entries` (htmx's parameters, a form's) that are not empty
  function filled(body, entries) {
    entries.forEach(function (value, key) {
      if (typeof value === "string" && value.trim() !== "") {
        body[key] = value.trim();
      }
    });
    return body;
  }

  // what an answer wrote into `elt` to be sent (`data-json`), or nothing
  function written(elt) {
    var json = elt && elt.getAttribute && elt.getAttribute("data-json");
    return json ? JSON.parse(json) : {};
  }

  htmx.defineExtension("outbox-json", {
    onEvent: function (name, evt) {
      if (name === "htmx:configRequest" && evt.detail.verb === "post") {
        evt.detail.headers["Content-Type"] = "application/json";
      }
      return true;
    },
    encodeParameters: function (xhr, parameters, elt) {
      xhr.overrideMimeType("text/json");
      return JSON.stringify(filled(written(elt), parameters));
    },
  });

  document.addEventListener("htmx:configRequest", function (evt) {
    if (evt.detail.verb !== "get") {
      evt.detail.headers["X-CSRF-Token"] = token();
      return;
    }
    // a filter's empty fields are no filter: left out of the URL (a route refuses an empty value)
    var empty = [];
    evt.detail.parameters.forEach(function (value, key) {
      if (typeof value === "string" && value.trim() === "") {
        empty.push(key);
      }
    });
    empty.forEach(function (key) {
      delete evt.detail.parameters[key];
    });
  });

  // -- confirmation -------------------------------------------------------------------------
  var dialog = null;

  // the dialog asks `question` (its `more` lines, then `shown`: nodes of a preview, the preview
  // route's answer as HTML); `act` once the operator confirms
  function ask(question, more, shown, act) {
    dialog = dialog || document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = question;
    var list = document.getElementById("confirm-more");
    list.replaceChildren();
    (more || []).forEach(function (line) {
      var p = document.createElement("p");
      p.textContent = line;
      list.appendChild(p);
    });
    document.getElementById("confirm-preview").replaceChildren.apply(
      document.getElementById("confirm-preview"),
      shown || []
    );
    dialog.addEventListener(
      "close",
      function () {
        if (dialog.returnValue === "ok") {
          act();
        }
      },
      { once: true }
    );
    dialog.returnValue = "";
    dialog.showModal();
  }

  // the JSON body the extension "outbox-json" sends for `elt` (its data-json, then its form's
  // fields that are not empty)
  function bodyOf(elt) {
    return elt.tagName === "FORM" ? filled(written(elt), new FormData(elt)) : written(elt);
  }

  // nodes of an HTML fragment the operators' routes answered (autoescaped by their templates)
  function nodes(html) {
    return Array.prototype.slice.call(
      new DOMParser().parseFromString(html, "text/html").body.childNodes
    );
  }

  // an action with a preview (`data-preview`: its route): the same body posted there first; a
  // refusal (bad input, a dependency down) is shown where the action's answer goes, with no
  // dialog; else the dialog shows what the action will touch
  function preview(url, elt, target) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "HX-Request": "true",
        "X-CSRF-Token": token(),
      },
      body: JSON.stringify(bodyOf(elt)),
    }).then(
      function (response) {
        return response.text().then(function (html) {
          if (response.ok) {
            // a refusal shown before (this form's last preview) is not this one's
            target.querySelectorAll(".problem").forEach(function (old) { old.remove(); });
            return nodes(html);
          }
          target.replaceChildren.apply(target, nodes(html));
          return null;
        });
      },
      function () {
        announce(target.id, "The preview could not be asked for: the app did not answer. Try again.");
        return null;
      }
    );
  }

  document.addEventListener("htmx:confirm", function (evt) {
    var question = evt.detail.question;
    if (!question) {
      return;
    }
    evt.preventDefault();
    var elt = evt.detail.elt;
    var more = [];
    var reason = elt.querySelector && elt.querySelector('[name="reason"]');
    if (reason) {
      more.push("Reason: " + reason.value);
    }
    var confirmed = function () {
      evt.detail.issueRequest(true);
    };
    var url = elt.getAttribute && elt.getAttribute("data-preview");
    if (!url) {
      ask(question, more, null, confirmed);
      return;
    }
    // validation before the confirmation: the form's own constraints, then the route's
    if (elt.tagName === "FORM" && !elt.reportValidity()) {
      return;
    }
    preview(url, elt, evt.detail.target).then(function (shown) {
      if (shown) {
        ask(question, more, shown, confirmed);
      }
    });
  });

  // -- acting on a selection ----------------------------------------------------------------
  function announce(where, text, field) {
    var result = document.getElementById(where);
    var p = document.createElement("p");
    p.className = "problem";
    p.textContent = text;
    result.replaceChildren(p);
    if (field) {
      field.focus();
    }
  }

  function checked(panel, selector) {
    return Array.prototype.map.call(panel.querySelectorAll(selector + ":checked"), function (box) {
      return box.value;
    });
  }

  // the selected `what` of `list` and the reason a discard of them takes: null, said in
  // `result`, when none is selected, or when `discarding` them and no reason is given
  function chosen(list, selector, result, reasonId, discarding, what) {
    var items = checked(list, selector);
    if (items.length === 0) {
      announce(result, "Select one or more " + what + " first.");
      return null;
    }
    var field = document.getElementById(reasonId);
    var reason = ((field || {}).value || "").trim();
    if (discarding && reason === "") {
      announce(result, "Give the reason to discard the selected " + what + " (it is kept in the audit log).", field);
      return null;
    }
    return { items: items, reason: reason, more: discarding ? ["Reason: " + reason] : [] };
  }

  // the selected quarantine records: one request each, in order, each answer appended
  function quarantineBulk(button) {
    var panel = document.getElementById("quarantine-panel");
    var base = panel.getAttribute("data-base");
    var replay = button.getAttribute("data-bulk") === "replay";
    var picked = chosen(panel, "input.select", "quarantine-result", "bulk-reason", !replay, "quarantined events");
    if (!picked) {
      return;
    }
    var ids = picked.items;
    var question = replay
      ? "Replay these " + ids.length + " events? Each one that can be sent now reaches subscribers in its session, after the quarantine notice they already have."
      : "Discard these " + ids.length + " events? Each one's version is given up: subscribers receive a discard notice in its place, record an accepted gap and apply the versions after it; the events themselves are never sent.";
    ask(question, picked.more.concat(ids.map(function (id) { return "Event " + id; })), null, function () {
      var result = document.getElementById("quarantine-result");
      result.replaceChildren();
      ids.reduce(function (previous, id) {
        return previous.then(function () {
          var url = base + "/quarantine/" + encodeURIComponent(id) + (replay ? "/replay" : "");
          return htmx.ajax(replay ? "POST" : "DELETE", url, {
            target: "#quarantine-result",
            swap: "beforeend",
            values: replay ? {} : { reason: picked.reason },
          });
        });
      }, Promise.resolve()).then(changed);
    });
  }

  // the selected dead letters: one request, naming them by sequence number (at most 100)
  function deadLetterBulk(button) {
    var group = button.closest("[data-letters]");
    var list = document.getElementById("dead-letter-list");
    var resubmit = button.getAttribute("data-bulk") === "resubmit-letters";
    var picked = chosen(list, "input.select-letter", "dead-letters-result", "letters-bulk-reason", !resubmit, "dead letters");
    if (!picked) {
      return;
    }
    var numbers = picked.items.map(Number);
    var entity = group.getAttribute("data-entity");
    var question = resubmit
      ? "Resubmit these " + numbers.length + " dead letters to " + entity + "? Each is sent again to " + entity + " only, in its session, under a MessageId of its own with its event id unchanged: the library's subscriber applies each once, then the versions it held behind them; a subscriber that deduplicates on MessageId takes them for new messages."
      : "Discard these " + numbers.length + " dead letters at " + entity + "? Each one's version is given up at " + entity + " only: its subscriber receives a discard notice in the aggregate's session, records an accepted gap and applies the versions it held after it; other subscriptions are not told.";
    var body = resubmit ? { sequenceNumbers: numbers } : { sequenceNumbers: numbers, reason: picked.reason };
    ask(question, picked.more.concat(numbers.map(function (n) { return "Dead letter " + n; })), null, function () {
      group.setAttribute("data-json", JSON.stringify(body));
      htmx.ajax("POST", group.getAttribute("data-letters") + (resubmit ? "/resubmit" : "/discard"), {
        source: group,
        target: "#dead-letters-result",
      });
    });
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-bulk]");
    if (!button) {
      return;
    }
    if (/-letters$/.test(button.getAttribute("data-bulk"))) {
      deadLetterBulk(button);
    } else {
      quarantineBulk(button);
    }
  });

  // -- the journey ----------------------------------------------------------------------------
  // the journey's search in the page's URL (?event=<id>, or ?aggregateType=<t>&aggregateId=<id>),
  // #journey: a link to share, and Back returns to the previous search
  var JOURNEY_KEYS = { eventId: "event", aggregateType: "aggregateType", aggregateId: "aggregateId" };

  function journeyQuery(form) {
    var query = new URLSearchParams();
    Object.keys(JOURNEY_KEYS).forEach(function (field) {
      var value = (form.elements[field].value || "").trim();
      if (value && !(field === "eventId" && form.elements.aggregateId.value.trim())) {
        query.set(JOURNEY_KEYS[field], value);
      }
    });
    return query.toString();
  }

  function journeyFromUrl(form) {
    var query = new URLSearchParams(window.location.search);
    Object.keys(JOURNEY_KEYS).forEach(function (field) {
      form.elements[field].value = query.get(JOURNEY_KEYS[field]) || "";
    });
    return query.has("event") || query.has("aggregateId");
  }

  function journey(form, fromUrl) {
    var base = form.getAttribute("data-base");
    var value = function (name) { return (form.elements[name].value || "").trim(); };
    var event = value("eventId");
    var type = value("aggregateType");
    var id = value("aggregateId");
    if (id && !type) {
      announce("journey-panel", "Give the aggregate's type with its id.", form.elements.aggregateType);
      return;
    }
    if (!event && !id) {
      announce("journey-panel", "Give an event id, or an aggregate type and id.", form.elements.eventId);
      return;
    }
    var url = id
      ? base + "/journey/aggregates/" + encodeURIComponent(type) + "/" + encodeURIComponent(id)
      : base + "/journey/events/" + encodeURIComponent(event);
    if (!fromUrl) {
      var search = "?" + journeyQuery(form);
      if (search !== window.location.search) {
        history.pushState({ outboxJourney: true }, "", window.location.pathname + search + "#journey");
      }
    }
    // the panel is the request's source: the form's fields are in the path, never in the query
    // (the journey's routes refuse a query parameter they do not know)
    htmx.ajax("GET", url, { source: "#journey-panel", target: "#journey-panel" });
  }

  function journeyOfUrl() {
    var form = document.getElementById("journey-form");
    if (form && journeyFromUrl(form)) {
      journey(form, true);
    } else if (form) {
      document.getElementById("journey-panel").replaceChildren();
    }
  }

  window.addEventListener("popstate", journeyOfUrl);
  // a shared link: its journey, once htmx is ready (it starts on DOMContentLoaded before this)
  document.addEventListener("DOMContentLoaded", function () {
    if (new URLSearchParams(window.location.search).toString()) {
      journeyOfUrl();
    }
  });

  document.addEventListener("submit", function (evt) {
    if (evt.target.id === "journey-form") {
      evt.preventDefault();
      journey(evt.target);
    }
  });

  // a journey link of another panel: fills the search, and searches
  document.addEventListener("click", function (evt) {
    var link = evt.target.closest && evt.target.closest("a[data-journey]");
    if (!link) {
      return;
    }
    var form = document.getElementById("journey-form");
    var byEvent = link.getAttribute("data-journey") === "event";
    form.elements.eventId.value = byEvent ? link.getAttribute("data-event-id") : "";
    form.elements.aggregateType.value = byEvent ? "" : link.getAttribute("data-aggregate-type");
    form.elements.aggregateId.value = byEvent ? "" : link.getAttribute("data-aggregate-id");
    journey(form);
  });

  // a button that loads another panel (a journey's "Show in the dead letters") shows it
  document.addEventListener("htmx:afterSwap", function (evt) {
    var shown = evt.detail.requestConfig && evt.detail.requestConfig.elt;
    var section = shown && shown.getAttribute && shown.getAttribute("data-show");
    if (section) {
      document.querySelector(section).scrollIntoView();
    }
  });

  // -- a re-drive's pages ---------------------------------------------------------------------
  var following = false;

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-redrive-follow]");
    if (!button) {
      return;
    }
    following = !following;
    var next = following && document.querySelector("#redrive-result [data-redrive-continue]");
    if (next) {
      button.textContent = "Stop after this page";
      next.click();
    }
  });

  document.addEventListener("htmx:afterSettle", function (evt) {
    if (evt.target.id !== "redrive-result" || !following) {
      return;
    }
    var next = document.querySelector("#redrive-result [data-redrive-continue]");
    if (!next) {
      following = false; // the last page, or a problem: said by the answer
      return;
    }
    document.querySelector("#redrive-result [data-redrive-follow]").textContent = "Stop after this page";
    next.click();
  });

  // -- a failed refresh keeps the last good state, marked stale ------------------------------
  // A panel (`data-keep`) whose refresh fails (a problem answered, or no answer) keeps what it
  // showed, marked stale: since when it is the state shown, and why the refresh failed (the
  // problem names the dependency that did not answer). A different request into the panel (a
  // list of another subscription) shows its problem instead: there is no last good state of it.
  function requestPath(detail) {
    return (detail.pathInfo && detail.pathInfo.requestPath) || "";
  }

  function clock(date) {
    return date.toISOString().slice(11, 19) + " UTC";
  }

  function markStale(panel, why) {
    panel.classList.add("stale");
    panel.setAttribute("aria-busy", "false");
    var note = panel.querySelector(":scope > .stale-note");
    if (!note) {
      note = document.createElement("div");
      note.className = "stale-note";
      panel.prepend(note);
    }
    var said = document.createElement("p");
    said.textContent =
      "Stale: this is the state of " + panel.getAttribute("data-loaded-at") +
      "; the refresh at " + clock(new Date()) + " failed.";
    note.replaceChildren.apply(note, [said].concat(why));
  }

  function keepsLast(detail) {
    var panel = detail.target;
    return !!(
      panel && panel.hasAttribute && panel.hasAttribute("data-keep") &&
      panel.getAttribute("data-loaded-from") === requestPath(detail)
    );
  }

  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (!evt.detail.isError || !keepsLast(evt.detail)) {
      return;
    }
    evt.detail.shouldSwap = false;
    markStale(evt.detail.target, nodes(evt.detail.serverResponse || ""));
  });

  document.addEventListener("htmx:sendError", function (evt) {
    if (keepsLast(evt.detail)) {
      var p = document.createElement("p");
      p.textContent = "The app did not answer (the network, or the app restarting).";
      markStale(evt.detail.target, [p]);
    }
  });

  document.addEventListener("htmx:afterSwap", function (evt) {
    var panel = evt.detail.target;
    var xhr = evt.detail.xhr;
    if (panel && panel.hasAttribute && panel.hasAttribute("data-keep") && xhr && xhr.status < 400) {
      panel.classList.remove("stale");
      panel.setAttribute("data-loaded-from", requestPath(evt.detail));
      panel.setAttribute("data-loaded-at", clock(new Date()));
      if (panel.id === "status-panel") {
        retryStale();
      }
    }
  });

  // the relay's state answered again (every 10 s): each stale panel asks again now, rather
  // than at its own next refresh (a minute later), so a mark clears soon after a recovery
  function retryStale() {
    document.querySelectorAll("[data-keep].stale").forEach(function (stale) {
      var path = stale.getAttribute("data-loaded-from");
      if (path && stale.id !== "status-panel" && !choosing(stale)) {
        htmx.ajax("GET", path, { source: stale, target: stale });
      }
    });
  }

  // -- refreshing ---------------------------------------------------------------------------
  var quarantined = null;

  // an action was taken: every list may be out of date (refreshed even while choosing in it)
  function changed() {
    document.body.dispatchEvent(new CustomEvent("outbox-changed", { detail: { acted: true } }));
  }

  // the relay's count of quarantined events changed: the lists are out of date (refreshed,
  // unless the operator is choosing in one: then at its next periodic refresh)
  document.addEventListener("htmx:afterSwap", function (evt) {
    var status = evt.detail.target.querySelector && evt.detail.target.querySelector("[data-quarantined]");
    if (status) {
      var count = status.getAttribute("data-quarantined");
      if (quarantined !== null && count !== quarantined) {
        document.body.dispatchEvent(new CustomEvent("outbox-changed", { detail: { acted: false } }));
      }
      quarantined = count;
    }
  });

  // an action was taken (one at a time; a run on the selection says so once, at its end)
  document.addEventListener("htmx:afterRequest", function (evt) {
    var config = evt.detail.requestConfig;
    if (config && config.verb !== "get" && evt.detail.elt !== document.body) {
      changed();
    }
  });

  function choosing(panel) {
    if (document.querySelector("dialog[open]")) {
      return true;
    }
    if (panel.querySelector("input.select:checked, input.select-letter:checked, details[open], [data-page-token]")) {
      return true;
    }
    var active = document.activeElement;
    return !!(active && panel.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName));
  }

  // data-poll: refreshed periodically, paused while choosing in it (or in the panel its value
  // names); an action's refresh always runs
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (!elt.hasAttribute || !elt.hasAttribute("data-poll")) {
      return;
    }
    var trigger = evt.detail.requestConfig && evt.detail.requestConfig.triggeringEvent;
    var acted = trigger && trigger.type === "outbox-changed" && trigger.detail && trigger.detail.acted;
    var periodic = !trigger || (trigger.type === "outbox-changed" && !acted);
    var named = elt.getAttribute("data-poll");
    var panel = (named && document.querySelector(named)) || elt;
    if (periodic && choosing(panel)) {
      evt.preventDefault();
    }
  });
})();
