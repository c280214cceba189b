# Workload Identity Federation for GKE: the Kubernetes service accounts themselves are the principals, so there
# is no Google service account to impersonate and no key anywhere. Each grant is on the one bucket only.
# The pool is the cluster's: it exists only once the cluster does, so the grants wait for it (on a fresh project IAM
# otherwise answers "Identity Pool does not exist").

locals {
  workload_pool = google_container_cluster.this.workload_identity_config[0].workload_pool
  ksa_principal = "principal://iam.googleapis.com/projects/${data.google_project.this.number}/locations/global/workloadIdentityPools/${local.workload_pool}/subject/ns/${local.namespace}/sa"
}

# The runner writes, rereads (to resume) and replaces result objects.
resource "google_storage_bucket_iam_member" "runner_objects" {
  bucket = google_storage_bucket.results.name
  role   = "roles/storage.objectUser"
  member = "${local.ksa_principal}/attnbench-runner"
}

# The bucket's own metadata (storage.buckets.get, which objectUser lacks): JAX's compilation cache in the bucket asks
# for it through gcsfs when it starts (runner/compiler.py keeps working without it, on a slower path).
resource "google_storage_bucket_iam_member" "runner_bucket_metadata" {
  bucket = google_storage_bucket.results.name
  role   = "roles/storage.legacyBucketReader"
  member = "${local.ksa_principal}/attnbench-runner"
}

# The dashboard only reads.
resource "google_storage_bucket_iam_member" "dashboard_objects" {
  bucket = google_storage_bucket.results.name
  role   = "roles/storage.objectViewer"
  member = "${local.ksa_principal}/attnbench-dashboard"
}
