"use strict";
/*
 * Offers: the provisioned throughput of databases and containers, kept as the service keeps
 * them (one "V2" offer per database with shared throughput and per container with
 * throughput of its own), for the local Cosmos DB endpoint (server.js).
 *
 *   - created with the resource: `x-ms-offer-throughput` (manual RU/s) or
 *     `x-ms-cosmos-offer-autopilot-settings` (autoscale, {"maxThroughput": N, ...}) on the
 *     create request; a container created with neither, in a database without shared
 *     throughput, gets the service's default of 400 RU/s (a provisioned-throughput account);
 *   - read (`GET /offers/{rid}`, with `x-ms-cosmos-min-throughput`), listed and queried
 *     (`/offers`, SQL over the offers: the SDKs find a resource's offer with
 *     `SELECT * FROM root r WHERE r.resource = <its _self>`), replaced (`PUT /offers/{rid}`);
 *   - deleted with their resource.
 * The routes (`handleOffers`, at the end) serve them over HTTP as the service does.
 * Limits as the service's: manual 400..1,000,000 RU/s in steps of 100, autoscale maximum
 * 1,000..1,000,000 in steps of 1,000; never below the minimum (a hundredth of the highest
 * RU/s ever provisioned, a tenth for the autoscale maximum). A replace completes at once
 * (`x-ms-offer-replace-pending: False`): a raise past 10,000 RU/s per physical partition
 * splits partitions as the service does, but before the answer (splits.js), where the service
 * splits in the background.
 */

const crypto = require("crypto");
const { CosmosError, notFound, badRequest, preconditionFailed, send } = require("./responses");
const { readJson, header, isQueryRequest } = require("./requests");
const { splitForThroughput } = require("./splits");

const MIN_MANUAL = 400;
const MANUAL_STEP = 100;
const MIN_AUTOSCALE_MAX = 1000;
const AUTOSCALE_STEP = 1000;
const MAX_THROUGHPUT = 1000000;
const DEFAULT_CONTAINER_THROUGHPUT = 400;

const ts = () => Math.floor(Date.now() / 1000);
const newEtag = () => `"${crypto.randomUUID()}"`;
const roundUp = (n, step) => Math.ceil(n / step) * step;

function manualRangeMessage(min) {
  return `The offer should have valid throughput values between ${min} and ${MAX_THROUGHPUT} inclusive in increments of ${MANUAL_STEP}.`;
}

function autoscaleRangeMessage(min) {
  return `The offer should have valid autoscale max throughput values between ${min} and ${MAX_THROUGHPUT} inclusive in increments of ${AUTOSCALE_STEP}.`;
}

const validManual = (n, min) =>
  Number.isInteger(n) && n >= min && n <= MAX_THROUGHPUT && n % MANUAL_STEP === 0;
const validAutoscale = (n, min) =>
  Number.isInteger(n) && n >= min && n <= MAX_THROUGHPUT && n % AUTOSCALE_STEP === 0;

/**
 * The throughput a create request asks for: null, {manual: N} or {autoscale: settings}.
 * `fail(message)` returns the error to throw (a 400).
 */
function requestedThroughput(headers, fail) {
  const manualRaw = headers["x-ms-offer-throughput"];
  const autoRaw = headers["x-ms-cosmos-offer-autopilot-settings"];
  if (manualRaw !== undefined && autoRaw !== undefined) {
    throw fail("Specify either a manual throughput (x-ms-offer-throughput) or autoscale settings, not both.");
  }
  if (manualRaw !== undefined) {
    const n = Number(manualRaw);
    if (!validManual(n, MIN_MANUAL)) throw fail(manualRangeMessage(MIN_MANUAL));
    return { manual: n };
  }
  if (autoRaw !== undefined) {
    let settings;
    try {
      settings = JSON.parse(String(autoRaw));
    } catch (e) {
      throw fail("The autoscale settings (x-ms-cosmos-offer-autopilot-settings) are not valid JSON.");
    }
    const max = settings && Number(settings.maxThroughput);
    if (!validAutoscale(max, MIN_AUTOSCALE_MAX)) throw fail(autoscaleRangeMessage(MIN_AUTOSCALE_MAX));
    return { autoscale: settings };
  }
  return null;
}

function autopilotSettings(settings, max) {
  const out = { tier: 0, maximumTierThroughput: 0, autoUpgrade: false, maxThroughput: max };
  if (settings && settings.autoUpgradePolicy) out.autoUpgradePolicy = settings.autoUpgradePolicy;
  return out;
}

class Offers {
  /** `newRid(n)` makes the n-th offer's resource id (3 bytes, 4 characters). */
  constructor(newRid) {
    this.newRid = newRid;
    this.byRid = new Map();
    this.ridCount = 0;
  }

  all() {
    return [...this.byRid.values()];
  }

  get(rid) {
    return this.byRid.get(rid) || null;
  }

  forResource(resourceRid) {
    return this.all().find(o => o.offerResourceId === resourceRid) || null;
  }

  /** The offer of a new database or container (`resource` is its stored body). */
  create(resource, throughput) {
    this.ridCount += 1;
    const rid = this.newRid(this.ridCount);
    const content = { offerIsRUPerMinuteThroughputEnabled: false };
    let ever;
    if (throughput.autoscale) {
      const max = Number(throughput.autoscale.maxThroughput);
      content.offerThroughput = max / 10; // scaled down to a tenth while idle
      content.offerAutopilotSettings = autopilotSettings(throughput.autoscale, max);
      ever = max;
    } else {
      content.offerThroughput = throughput.manual;
      ever = throughput.manual;
    }
    content.offerMinimumThroughputParameters = { maxThroughputEverProvisioned: ever, maxConsumedStorageEverInKB: 0 };
    const offer = {
      resource: resource._self,
      offerType: "Invalid",
      offerResourceId: resource._rid,
      offerVersion: "V2",
      content,
      id: rid,
      _rid: rid,
      _self: `offers/${rid}/`,
      _etag: newEtag(),
      _ts: ts()
    };
    this.byRid.set(rid, offer);
    return offer;
  }

  removeFor(resourceRids) {
    const gone = new Set(resourceRids);
    for (const [rid, offer] of this.byRid) if (gone.has(offer.offerResourceId)) this.byRid.delete(rid);
  }

  /** The lowest value a replace may set: manual RU/s, or the autoscale maximum. */
  minimum(offer) {
    const ever = ((offer.content || {}).offerMinimumThroughputParameters || {}).maxThroughputEverProvisioned || 0;
    if (offer.content.offerAutopilotSettings) {
      return Math.max(MIN_AUTOSCALE_MAX, roundUp(ever / 10, AUTOSCALE_STEP));
    }
    return Math.max(MIN_MANUAL, roundUp(ever / 100, MANUAL_STEP));
  }

  /**
   * PUT /offers/{rid} with the whole offer, as the SDKs send it (they change
   * content.offerThroughput or content.offerAutopilotSettings.maxThroughput).
   * `errors` = {notFound(), badRequest(message), preconditionFailed()}.
   */
  replace(rid, body, ifMatch, errors) {
    const offer = this.get(rid);
    if (!offer) throw errors.notFound();
    if (ifMatch && String(ifMatch) !== offer._etag) throw errors.preconditionFailed();
    if (!body || typeof body !== "object" || !body.content || typeof body.content !== "object") {
      throw errors.badRequest("The offer to replace must have content.");
    }
    if ((body.offerResourceId !== undefined && body.offerResourceId !== offer.offerResourceId) ||
        (body.resource !== undefined && body.resource !== offer.resource)) {
      throw errors.badRequest("The offer's resource cannot change.");
    }
    const wasAutoscale = Boolean(offer.content.offerAutopilotSettings);
    const isAutoscale = Boolean(body.content.offerAutopilotSettings);
    if (wasAutoscale !== isAutoscale) {
      throw errors.badRequest(
        "Changing between manual and autoscale throughput is a migration of the offer (control plane), not a replace.");
    }
    const min = this.minimum(offer);
    const content = { ...offer.content };
    let provisioned;
    if (isAutoscale) {
      const given = body.content.offerAutopilotSettings;
      const max = Number(given.maxThroughput);
      if (!validAutoscale(max, min)) throw errors.badRequest(autoscaleRangeMessage(min));
      content.offerAutopilotSettings = autopilotSettings(
        given.autoUpgradePolicy ? given : offer.content.offerAutopilotSettings, max);
      content.offerThroughput = max / 10;
      provisioned = max;
    } else {
      const n = Number(body.content.offerThroughput);
      if (!validManual(n, min)) throw errors.badRequest(manualRangeMessage(min));
      content.offerThroughput = n;
      provisioned = n;
    }
    const previous = content.offerMinimumThroughputParameters || {};
    content.offerMinimumThroughputParameters = {
      ...previous,
      maxThroughputEverProvisioned: Math.max(previous.maxThroughputEverProvisioned || 0, provisioned)
    };
    const updated = { ...offer, content, _etag: newEtag(), _ts: ts() };
    this.byRid.set(rid, updated);
    return updated;
  }

  snapshot() {
    return { ridCount: this.ridCount, offers: this.all() };
  }

  restore(state) {
    this.byRid.clear();
    this.ridCount = (state && state.ridCount) || 0;
    for (const offer of (state && state.offers) || []) this.byRid.set(offer._rid, offer);
  }
}

// ---------------------------------------------------------------- routes

const OFFER_ERRORS = {
  notFound,
  badRequest,
  preconditionFailed
};

/** /offers (read feed, query) and /offers/{rid} (read, replace). */
async function handleOffers(account, req, res, segs) {
  if (segs[0] !== "offers" || segs.length > 2) return false;
  const offers = account.offers;
  if (segs.length === 1) {
    let rows = offers.all();
    if (req.method === "POST" && isQueryRequest(req)) {
      let body = await readJson(req);
      if (typeof body === "string") body = { query: body };
      if (!body || typeof body.query !== "string") throw badRequest("missing query");
      try {
        rows = account.databases._getQuery(body.query).exec(rows, { parameters: body.parameters || [] }).result;
      } catch (err) {
        throw badRequest(err.message);
      }
    } else if (req.method !== "GET") {
      throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
    }
    send(req, res, 200, { _rid: "", Offers: rows, _count: rows.length }, { "x-ms-item-count": String(rows.length) });
    return true;
  }
  const rid = segs[1];
  if (req.method === "GET") {
    const offer = offers.get(rid);
    if (!offer) throw notFound();
    send(req, res, 200, offer, {
      "x-ms-cosmos-min-throughput": String(offers.minimum(offer)),
      "x-ms-offer-replace-pending": "False"
    });
    return true;
  }
  if (req.method === "PUT") {
    const body = await readJson(req);
    const offer = offers.replace(rid, body, header(req, "if-match"), OFFER_ERRORS);
    splitForThroughput(account, offer); // a raise past 10,000 RU/s per partition splits
    send(req, res, 200, offer, { "x-ms-offer-replace-pending": "False" });
    return true;
  }
  throw new CosmosError(405, "MethodNotAllowed", "Method not allowed");
}

module.exports = { Offers, requestedThroughput, DEFAULT_CONTAINER_THROUGHPUT, handleOffers };
