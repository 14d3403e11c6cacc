// The operators' console: what htmx does not do by itself. Every request the page makes is
// htmx's, to the operators' routes (the signed-in door); this file only
// - sends the page's token with every action (X-CSRF-Token: cosmos_outbox/_console/guard.py),
// - sends a form to a route that reads JSON as JSON (the extension "outbox-json"), with the
//   fields an answer wrote into the button (`data-json`: a selection, a continuation token),
//   and the fields a route takes in its query (`data-query`: a failure's archive's reason) in
//   its URL,
// - leaves the empty fields of a search out of its URL,
// - asks before an action, in a dialog that says what subscribers will see (htmx:confirm);
//   a bulk action (a re-drive, a resubmit-all, a discard-all) shows its preview there first,
//   the preview route's answer: bad input is refused before anything is confirmed; the list
//   the action came from is not replaced while it is confirmed (its refresh is held, then
//   asked for again), as htmx would drop the action of an element no longer on the page,
// - acts on the selected quarantine records one by one, and on the selected dead letters in
//   one call, through the same routes,
// - sets the Failures panel's filter to a failure group when its row's "Its failures" is
//   followed,
// - turns the journey's search (an event id, or an aggregate type and id) and the journey
//   links of the other panels into the journey's route, and into the page's URL (shareable;
//   Back returns to the previous search),
// - follows a re-drive's pages to the end when asked, and keeps a bulk operation's card (its
//   progress, asked for every 2 s) as it was when an ask fails,
// - refreshes the lists when the relay's count of quarantined events changes or an action was
//   taken, and pauses the periodic refresh of a panel while an operator is choosing in it,
// - keeps a panel's last good state, marked stale, when its refresh fails, its actions disabled
//   (reads stay), and asks again each time the relay's state answers (every 10 s) until the
//   mark clears,
// - keeps what an operator is typing in a panel (the focused field) through its refresh.
(function () {
  "use strict";

  function token() {
    var meta = document.querySelector('meta[name="outbox-csrf"]');
    return meta ? meta.getAttribute("content") : "";
  }

  function byId(id) {
    return document.getElementById(id);
  }

  // a <p> of `text`
  function paragraph(text) {
    var p = document.createElement("p");
    p.textContent = text;
    return p;
  }

  function replace(elt, children) {
    elt.replaceChildren.apply(elt, children);
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

  // the fields a route takes in its query, not its body (`data-query`: their names, space
  // separated; a failure's archive takes its `reason` so): moved into the action's URL
  function inQuery(detail) {
    var names = (detail.elt.getAttribute && detail.elt.getAttribute("data-query")) || "";
    var query = new URLSearchParams();
    names.split(/\s+/).forEach(function (name) {
      var value = name && detail.parameters[name];
      if (typeof value === "string") {
        if (value.trim() !== "") {
          query.set(name, value.trim());
        }
        delete detail.parameters[name];
      }
    });
    var search = query.toString();
    if (search) {
      detail.path += (detail.path.indexOf("?") < 0 ? "?" : "&") + search;
    }
  }

  document.addEventListener("htmx:configRequest", function (evt) {
    if (evt.detail.verb !== "get") {
      evt.detail.headers["X-CSRF-Token"] = token();
      inQuery(evt.detail);
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
  // The element whose action is being confirmed (its preview asked for, then its dialog open):
  // a list holding it is not swapped meanwhile. htmx drops, without a word, a request whose
  // element has left the page, so a refresh landing while the operator reads the dialog (an
  // earlier Refresh still in flight, another panel's action) would lose the confirmed action.
  // The refresh held is asked for again once the dialog closes.
  var confirming = null;
  var held = [];

  function confirmed(elt) {
    confirming = elt;
    if (elt === null) {
      held.splice(0).forEach(function (h) {
        htmx.ajax("GET", h.path, { source: h.panel, target: h.panel });
      });
    }
  }

  function holdsConfirming(detail) {
    var target = detail.target;
    if (!confirming || !target || !target.contains || !target.contains(confirming)) {
      return false;
    }
    var path = requestPath(detail);
    if (detail.requestConfig && detail.requestConfig.verb === "get" && path &&
        !held.some(function (h) { return h.panel === target && h.path === path; })) {
      held.push({ panel: target, path: path });
    }
    return true;
  }

  // the dialog asks `question` (its `more` lines, then `shown`: nodes of a preview, the preview
  // route's answer as HTML); `act` once the operator confirms
  function ask(question, more, shown, act) {
    var dialog = byId("confirm");
    byId("confirm-text").textContent = question;
    replace(byId("confirm-more"), (more || []).map(paragraph));
    replace(byId("confirm-preview"), shown || []);
    dialog.addEventListener(
      "close",
      function () {
        if (dialog.returnValue === "ok") {
          act();
        }
        confirmed(null);
      },
      { once: true }
    );
    dialog.returnValue = "";
    dialog.showModal();
  }

  // nodes of an HTML fragment the operators' routes answered (autoescaped by their templates)
  function nodes(html) {
    return Array.prototype.slice.call(
      new DOMParser().parseFromString(html, "text/html").body.childNodes
    );
  }

  // an action with a preview (`data-preview`: its route): the same body (the extension's: its
  // data-json, then its form's fields that are not empty) posted there first; a refusal (bad
  // input, a dependency down) is shown where the action's answer goes, with no dialog; else
  // the dialog shows what the action will touch
  function preview(url, elt, target) {
    var body = elt.tagName === "FORM" ? filled(written(elt), new FormData(elt)) : written(elt);
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: {
        "Content-Type": "application/json",
        "HX-Request": "true",
        "X-CSRF-Token": token(),
      },
      body: JSON.stringify(body),
    }).then(
      function (response) {
        return response.text().then(function (html) {
          if (response.ok) {
            // a refusal shown before (this form's last preview) is not this one's
            target.querySelectorAll(".problem").forEach(function (old) { old.remove(); });
            return nodes(html);
          }
          replace(target, nodes(html));
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
    var reason = elt.querySelector && elt.querySelector('[name="reason"]');
    var more = reason ? ["Reason: " + reason.value] : [];
    var target = evt.detail.target;
    var act = function () {
      if (document.body.contains(elt)) {
        evt.detail.issueRequest(true);
      } else {  // never a silent nothing: said where its answer would have gone
        var p = paragraph("Nothing was done: the list this action came from was replaced while " +
          "you confirmed it. Find it in the list again and ask again.");
        p.className = "problem";
        replace(target, [p]);
      }
    };
    var url = elt.getAttribute && elt.getAttribute("data-preview");
    if (!url) {
      confirmed(elt);
      ask(question, more, null, act);
      return;
    }
    // validation before the confirmation: the form's own constraints, then the route's
    if (elt.tagName === "FORM" && !elt.reportValidity()) {
      return;
    }
    confirmed(elt);
    preview(url, elt, target).then(function (shown) {
      if (shown) {
        ask(question, more, shown, act);
      } else {
        confirmed(null);
      }
    });
  });

  // -- acting on a selection ----------------------------------------------------------------
  function announce(where, text, field) {
    var p = paragraph(text);
    p.className = "problem";
    byId(where).replaceChildren(p);
    if (field) {
      field.focus();
    }
  }

  // What each kind of bulk action picks, in which list, the reason field its discard takes,
  // and what it asks (`n`: how many, `at`: the dead letters' subscription).
  var BULK = {
    replay: {
      list: "quarantine-panel", box: "input.select", result: "quarantine-result", what: "quarantined events",
      ask: function (n) { return "Replay these " + n + " events? Each one that can be sent now reaches subscribers in its session, after the quarantine notice they already have."; },
    },
    discard: {
      list: "quarantine-panel", box: "input.select", result: "quarantine-result", what: "quarantined events", reason: "bulk-reason",
      ask: function (n) { return "Discard these " + n + " events? Each one's version is given up: subscribers receive a discard notice in its place, record an accepted gap and apply the versions after it; the events themselves are never sent."; },
    },
    "resubmit-letters": {
      list: "dead-letter-list", box: "input.select-letter", result: "dead-letters-result", what: "dead letters",
      ask: function (n, at) { return "Resubmit these " + n + " dead letters to " + at + "? Each is sent again to " + at + " only, in its session, under a MessageId of its own with its event id unchanged: the library's subscriber applies each once, then the versions it held behind them; a subscriber that deduplicates on MessageId takes them for new messages."; },
    },
    "discard-letters": {
      list: "dead-letter-list", box: "input.select-letter", result: "dead-letters-result", what: "dead letters", reason: "letters-bulk-reason",
      ask: function (n, at) { return "Discard these " + n + " dead letters at " + at + "? Each one's version is given up at " + at + " only: its subscriber receives a discard notice in the aggregate's session, records an accepted gap and applies the versions it held after it; other subscriptions are not told."; },
    },
  };

  // the selected rows, and the reason a discard takes: said in the result, and nothing done,
  // when none is selected or a discard has no reason; else asked, then: quarantine records one
  // request each, in order, each answer appended; dead letters one request naming them (at
  // most 100)
  function bulk(button) {
    var kind = button.getAttribute("data-bulk");
    var how = BULK[kind];
    var items = Array.prototype.map.call(
      byId(how.list).querySelectorAll(how.box + ":checked"),
      function (box) { return box.value; }
    );
    if (items.length === 0) {
      announce(how.result, "Select one or more " + how.what + " first.");
      return;
    }
    var field = how.reason && byId(how.reason);
    var reason = ((field || {}).value || "").trim();
    if (how.reason && reason === "") {
      announce(how.result, "Give the reason to discard the selected " + how.what + " (it is kept in the audit log).", field);
      return;
    }
    var more = how.reason ? ["Reason: " + reason] : [];
    var group = button.closest("[data-letters]");
    if (group) {
      var numbers = items.map(Number);
      var entity = group.getAttribute("data-entity");
      var body = how.reason ? { sequenceNumbers: numbers, reason: reason } : { sequenceNumbers: numbers };
      ask(how.ask(numbers.length, entity), more.concat(numbers.map(function (n) { return "Dead letter " + n; })), null, function () {
        group.setAttribute("data-json", JSON.stringify(body));
        htmx.ajax("POST", group.getAttribute("data-letters") + (how.reason ? "/discard" : "/resubmit"), {
          source: group,
          target: "#dead-letters-result",
        });
      });
      return;
    }
    var base = byId(how.list).getAttribute("data-base");
    ask(how.ask(items.length), more.concat(items.map(function (id) { return "Event " + id; })), null, function () {
      byId(how.result).replaceChildren();
      items.reduce(function (previous, id) {
        return previous.then(function () {
          var url = base + "/quarantine/" + encodeURIComponent(id) + (how.reason ? "" : "/replay");
          return htmx.ajax(how.reason ? "DELETE" : "POST", url, {
            target: "#quarantine-result",
            swap: "beforeend",
            values: how.reason ? { reason: reason } : {},
          });
        });
      }, Promise.resolve()).then(function () { changed(); });
    });
  }

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

  // the search the page's URL names (a shared link, Back), or none
  function journeyOfUrl() {
    var form = byId("journey-form");
    if (!form) {
      return;
    }
    var query = new URLSearchParams(window.location.search);
    Object.keys(JOURNEY_KEYS).forEach(function (field) {
      form.elements[field].value = query.get(JOURNEY_KEYS[field]) || "";
    });
    if (query.has("event") || query.has("aggregateId")) {
      journey(form, true);
    } else {
      byId("journey-panel").replaceChildren();
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
  function journeyLink(link) {
    var form = byId("journey-form");
    var byEvent = link.getAttribute("data-journey") === "event";
    form.elements.eventId.value = byEvent ? link.getAttribute("data-event-id") : "";
    form.elements.aggregateType.value = byEvent ? "" : link.getAttribute("data-aggregate-type");
    form.elements.aggregateId.value = byEvent ? "" : link.getAttribute("data-aggregate-id");
    journey(form);
  }

  // -- a re-drive's pages ---------------------------------------------------------------------
  var following = false;

  // "Continue" of the report shown, clicked while following (the follow button says so); none:
  // the last page, or a problem, said by the answer
  function followOn() {
    var next = following && document.querySelector("#redrive-result [data-redrive-continue]");
    following = !!next;
    if (next) {
      document.querySelector("#redrive-result [data-redrive-follow]").textContent = "Stop after this page";
      next.click();
    }
  }

  // a failure group's "Its failures": the Failures panel's filter set to that group (any kind
  // and state) and submitted, so the panel's own refresh keeps it until the operator clears it
  function failuresOfGroup(group) {
    var form = byId("failures-filter");
    if (!form || !group) {
      return;
    }
    form.elements.group.value = group;
    form.elements.kind.value = "";
    form.elements.status.value = "";
    htmx.trigger(form, "submit");
  }

  document.addEventListener("click", function (evt) {
    var at = evt.target.closest ? evt.target : null;
    var found = at && at.closest("[data-bulk]");
    if (found) {
      bulk(found);
    } else if ((found = at && at.closest("a[data-journey]"))) {
      journeyLink(found);
    } else if ((found = at && at.closest("a[data-failures-group]"))) {
      failuresOfGroup(found.getAttribute("data-failures-group"));
    } else if (at && at.closest("[data-redrive-follow]")) {
      following = !following;
      followOn();
    }
  });

  document.addEventListener("htmx:afterSettle", function (evt) {
    if (evt.target.id === "redrive-result" && following) {
      followOn();
    }
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

  // a stale panel's actions are disabled (a Retry or Discard would act on what may be gone);
  // its reads (a list, a body) stay; the fresh state swapped in brings live ones
  var ACTIONS = "button[hx-post], button[hx-delete], button[data-bulk], button[data-preview], " +
    "form[hx-post] button, form[hx-delete] button, form[hx-post] input, form[hx-delete] input";

  function disableActions(panel) {
    panel.querySelectorAll(ACTIONS).forEach(function (action) {
      action.disabled = true;
      action.setAttribute("data-disabled-stale", "");
      action.title = "Disabled: this panel is stale (its refresh failed); refresh it to act";
    });
  }

  function markStale(panel, why) {
    panel.classList.add("stale");
    panel.setAttribute("aria-busy", "false");
    disableActions(panel);
    var note = panel.querySelector(":scope > .stale-note");
    if (!note) {
      note = document.createElement("div");
      note.className = "stale-note";
      panel.prepend(note);
    }
    replace(note, [paragraph(
      "Stale: this is the state of " + panel.getAttribute("data-loaded-at") +
      "; the refresh at " + clock(new Date()) + " failed."
    )].concat(why));
  }

  function keepsLast(detail) {
    var panel = detail.target;
    return !!(
      panel && panel.hasAttribute && panel.hasAttribute("data-keep") &&
      panel.getAttribute("data-loaded-from") === requestPath(detail)
    );
  }

  // a bulk operation's card asking for itself (its progress): a failed ask (the app restarting)
  // keeps the card as it was, and it asks again at its next turn
  function operationCard(detail) {
    var elt = detail.elt;
    return !!(elt && elt.hasAttribute && elt.hasAttribute("data-operation-id") &&
              elt === detail.target);
  }

  // what an operator is typing in a panel (the field that has the focus, changed from what the
  // panel came with) when the panel's refresh lands -- one that was on its way before they
  // began, or one that an action elsewhere asked for: given to the same field of the fresh
  // state, with the focus and the caret, so that typing goes on (a Discard all's reason is not
  // emptied under the operator's hands)
  var typing = null;
  var TYPED = /^(text|search|number|email|url|tel|)$/;

  function typedIn(panel) {
    var field = document.activeElement;
    if (!field || !field.id || !panel.contains(field) || field.value === field.defaultValue ||
        !(field.tagName === "TEXTAREA" || (field.tagName === "INPUT" && TYPED.test(field.type)))) {
      return null;
    }
    var caret = null;
    try {
      caret = [field.selectionStart, field.selectionEnd];
    } catch (e) {
      caret = null;  // a number field has no caret to read
    }
    return { panel: panel, id: field.id, value: field.value, caret: caret };
  }

  function samePath(a, b) {
    return (a || "").split("?")[0] === (b || "").split("?")[0];
  }

  function typedAgain(panel) {
    var kept = typing;
    typing = null;
    if (!kept || kept.panel !== panel) {
      return;
    }
    var field = byId(kept.id);
    if (!field || !panel.contains(field) || field.value !== field.defaultValue) {
      return;
    }
    field.value = kept.value;
    field.focus();
    if (kept.caret) {
      try {
        field.setSelectionRange(kept.caret[0], kept.caret[1]);
      } catch (e) {
        // a number field: its caret stays where focus() put it
      }
    }
  }

  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (holdsConfirming(evt.detail)) {
      evt.detail.shouldSwap = false;
      return;
    }
    if (evt.detail.isError && operationCard(evt.detail)) {
      evt.detail.shouldSwap = false;
      return;
    }
    if (evt.detail.isError && keepsLast(evt.detail)) {
      evt.detail.shouldSwap = false;
      markStale(evt.detail.target, nodes(evt.detail.serverResponse || ""));
      return;
    }
    var panel = evt.detail.target;
    typing = null;
    if (evt.detail.shouldSwap && panel && panel.hasAttribute && panel.hasAttribute("data-keep") &&
        samePath(panel.getAttribute("data-loaded-from"), requestPath(evt.detail))) {
      typing = typedIn(panel);
    }
  });

  document.addEventListener("htmx:sendError", function (evt) {
    if (keepsLast(evt.detail)) {
      markStale(evt.detail.target, [paragraph("The app did not answer (the network, or the app restarting).")]);
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

  // the lists may be out of date: refreshed; `acted` (an action was taken) even while choosing
  // in one, else (the relay's count of quarantined events changed) at its next periodic refresh
  function changed(acted) {
    document.body.dispatchEvent(new CustomEvent("outbox-changed", { detail: { acted: acted !== false } }));
  }

  document.addEventListener("htmx:afterSwap", function (evt) {
    var panel = evt.detail.target;
    var xhr = evt.detail.xhr;
    // a button that loads another panel (a journey's "Show in the dead letters") shows it
    var shown = evt.detail.requestConfig && evt.detail.requestConfig.elt;
    var section = shown && shown.getAttribute && shown.getAttribute("data-show");
    if (section) {
      document.querySelector(section).scrollIntoView();
    }
    if (panel && panel.hasAttribute && panel.hasAttribute("data-keep") && xhr && xhr.status < 400) {
      typedAgain(panel);
      panel.classList.remove("stale");
      panel.setAttribute("data-loaded-from", requestPath(evt.detail));
      panel.setAttribute("data-loaded-at", clock(new Date()));
      if (panel.id === "status-panel") {
        retryStale();
      }
    }
    var status = panel.querySelector && panel.querySelector("[data-quarantined]");
    if (status) {
      var count = status.getAttribute("data-quarantined");
      if (quarantined !== null && count !== quarantined) {
        changed(false);
      }
      quarantined = count;
    }
  });

  // a bulk operation's card shown stopped (done, paused, cancelled): what it acted on changed,
  // so the lists are refreshed (its start's refresh came before its worker acted)
  document.addEventListener("htmx:load", function (evt) {
    var card = evt.detail.elt;
    var state = card && card.getAttribute && card.hasAttribute("data-operation-id") &&
      card.classList.contains("operation") && card.getAttribute("data-state");
    if (state === "done" || state === "paused" || state === "cancelled") {
      changed();
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
