"use strict";
/*
 * Resource ids in the service's encoding, for the local Cosmos DB endpoint (server.js).
 *
 * The service writes a resource id (_rid, and so _self) in base64 with '/' replaced by '-'
 * (its ResourceId.ToBase64String; the SDKs' parsers turn '-' back into '/'), so an id never
 * contains a path separator. 1.0.1 writes plain base64: from about the 63rd document of a
 * container ids contain '/', and every SDK call given an item dict (which addresses the item
 * by its _self) fails client-side ("Failed Parsing ResourceID from link").

 *
 * Requiring this module patches the package's ResourceId (encode and decode) once, before
 * any account is built; offers get their 3-byte ids here too.
 */

const { ResourceId } = require("./internals");

/** A resource id in the service's encoding (idempotent: also converts a 1.0.1 id). */
const serviceRid = rid => String(rid).replace(/\//g, "-");
ResourceId.toBase64String = buffer => serviceRid(buffer.toString("base64"));
// 1.0.1 replaces only the first '-'
ResourceId.fromBase64String = s => Buffer.from(String(s).replace(/-/g, "/"), "base64");

/** The 3-byte resource id of the n-th offer, in the service's encoding ("AQAA"). */
function offerRid(n) {
  const rid = new ResourceId();
  rid.offer = String(n);
  return rid.toString();
}

module.exports = { serviceRid, offerRid };
