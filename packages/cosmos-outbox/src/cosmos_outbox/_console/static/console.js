// The operators' console: what htmx does not do by itself. Every request the page makes is
// htmx's, to the operators' routes (the signed-in door); this file only
// - sends the page's token with every action (X-CSRF-Token: cosmos_outbox/_console/guard.py),
// - sends a form to a route that reads JSON as JSON (the extension "outbox-json"),
// - asks before an action, in a dialog that says what subscribers will see (htmx:confirm),
// - acts on the selected quarantine records one by one, through the same routes,
// - refreshes the quarantine when the relay's count of it changes, and pauses the periodic
//   refresh of a panel while an operator is choosing in it.
(function () {
  "use strict";

  function token() {
    var meta = document.querySelector('meta[name="outbox-csrf"]');
    return meta ? meta.getAttribute("content") : "";
  }

  htmx.defineExtension("outbox-json", {
    onEvent: function (name, evt) {
      if (name === "htmx:configRequest" && evt.detail.verb === "post") {
        evt.detail.headers["Content-Type"] = "application/json";
      }
      return true;
    },
    encodeParameters: function (xhr, parameters) {
      xhr.overrideMimeType("text/json");
      var body = {};
      parameters.forEach(function (value, key) {
        if (typeof value === "string" && value.trim() !== "") {
          body[key] = value.trim();
        }
      });
      return JSON.stringify(body);
    },
  });

  document.addEventListener("htmx:configRequest", function (evt) {
    if (evt.detail.verb !== "get") {
      evt.detail.headers["X-CSRF-Token"] = token();
    }
  });

  // -- confirmation -------------------------------------------------------------------------
  var dialog = null;

  function ask(question, more) {
    dialog = dialog || document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = question;
    var list = document.getElementById("confirm-more");
    list.replaceChildren();
    (more || []).forEach(function (line) {
      var p = document.createElement("p");
      p.textContent = line;
      list.appendChild(p);
    });
    return new Promise(function (resolve) {
      dialog.addEventListener(
        "close",
        function () {
          resolve(dialog.returnValue === "ok");
        },
        { once: true }
      );
      dialog.returnValue = "";
      dialog.showModal();
    });
  }

  document.addEventListener("htmx:confirm", function (evt) {
    var question = evt.detail.question;
    if (!question) {
      return;
    }
    evt.preventDefault();
    var more = [];
    var reason = evt.detail.elt.querySelector && evt.detail.elt.querySelector('[name="reason"]');
    if (reason) {
      more.push("Reason: " + reason.value);
    }
    ask(question, more).then(function (ok) {
      if (ok) {
        evt.detail.issueRequest(true);
      }
    });
  });

  // -- the selected quarantine records ------------------------------------------------------
  function announce(text) {
    var result = document.getElementById("quarantine-result");
    var p = document.createElement("p");
    p.className = "problem";
    p.textContent = text;
    result.replaceChildren(p);
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-bulk]");
    if (!button) {
      return;
    }
    var panel = document.getElementById("quarantine-panel");
    var base = panel.getAttribute("data-base");
    var ids = Array.prototype.map.call(panel.querySelectorAll("input.select:checked"), function (box) {
      return box.value;
    });
    if (ids.length === 0) {
      announce("Select one or more quarantined events first.");
      return;
    }
    var replay = button.getAttribute("data-bulk") === "replay";
    var reason = (document.getElementById("bulk-reason") || {}).value || "";
    if (!replay && reason.trim() === "") {
      announce("Give the reason to discard the selected events (it is kept in the audit log).");
      document.getElementById("bulk-reason").focus();
      return;
    }
    var question = replay
      ? "Replay these " + ids.length + " events? Each one that can be sent now reaches subscribers in its session, after the quarantine notice they already have."
      : "Discard these " + ids.length + " events? Each one's version is given up: subscribers receive a discard notice in its place, record an accepted gap and apply the versions after it; the events themselves are never sent.";
    var more = ids.map(function (id) { return "Event " + id; });
    if (!replay) {
      more.unshift("Reason: " + reason.trim());
    }
    ask(question, more).then(function (ok) {
      if (!ok) {
        return;
      }
      var result = document.getElementById("quarantine-result");
      result.replaceChildren();
      // one request at a time, in order: each answer is appended as it comes
      ids.reduce(function (previous, id) {
        return previous.then(function () {
          var url = base + "/quarantine/" + encodeURIComponent(id) + (replay ? "/replay" : "");
          return htmx.ajax(replay ? "POST" : "DELETE", url, {
            target: "#quarantine-result",
            swap: "beforeend",
            values: replay ? {} : { reason: reason.trim() },
          });
        });
      }, Promise.resolve()).then(function () {
        document.body.dispatchEvent(new Event("outbox-changed"));
      });
    });
  });

  // -- refreshing ---------------------------------------------------------------------------
  var quarantined = null;

  // the relay's count of quarantined events changed: the quarantine list is out of date
  document.addEventListener("htmx:afterSwap", function (evt) {
    var status = evt.detail.target.querySelector && evt.detail.target.querySelector("[data-quarantined]");
    if (status) {
      var count = status.getAttribute("data-quarantined");
      if (quarantined !== null && count !== quarantined) {
        document.body.dispatchEvent(new Event("outbox-changed"));
      }
      quarantined = count;
    }
  });

  // an action was taken (one at a time; a run on the selection says so once, at its end)
  document.addEventListener("htmx:afterRequest", function (evt) {
    var config = evt.detail.requestConfig;
    if (config && config.verb !== "get" && evt.detail.elt !== document.body) {
      document.body.dispatchEvent(new Event("outbox-changed"));
    }
  });

  function choosing(panel) {
    if (document.querySelector("dialog[open]")) {
      return true;
    }
    if (panel.querySelector("input.select:checked, details[open], [data-page-token]")) {
      return true;
    }
    var active = document.activeElement;
    return !!(active && panel.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName));
  }

  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    var periodic = !evt.detail.requestConfig || !evt.detail.requestConfig.triggeringEvent;
    if (periodic && elt.hasAttribute && elt.hasAttribute("data-poll") && choosing(elt)) {
      evt.preventDefault();
    }
  });
})();
