// Validate GKE custom resources (BackendConfig, ManagedCertificate, ...) against their CRD schemas, as the npm
// package @kubernetes-models/gke compiles them. tests/test_k8s.py runs it for the objects kubernetes-validate has no
// schema for. Usage: node validate_gke_crds.cjs NODE_MODULES < objects.json
// Prints one line per object ("ok KIND NAME", "invalid KIND NAME: why", "unknown APIVERSION KIND"); exits 1 on any
// but ok.
"use strict";
const path = require("path");

const modules = process.argv[2];
const objects = JSON.parse(require("fs").readFileSync(0, "utf8"));
let failed = false;
for (const object of objects) {
  const file = path.resolve(modules, "@kubernetes-models", "gke", object.apiVersion, object.kind);
  let Model;
  try {
    Model = require(file)[object.kind];
  } catch (error) {
    console.log(`unknown ${object.apiVersion} ${object.kind}`);
    failed = true;
    continue;
  }
  try {
    new Model(object).validate();
    console.log(`ok ${object.kind} ${object.metadata.name}`);
  } catch (error) {
    console.log(`invalid ${object.kind} ${object.metadata.name}: ${error.message.split("\n")[0]}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
