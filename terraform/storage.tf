# The results bucket and the image registry.

resource "google_storage_bucket" "results" {
  # checkov:skip=CKV_GCP_62:Access is recorded by Cloud Audit Logs (Data Access logs for GCS); a second bucket just for usage logs adds cost and nothing the runbook reads.
  name                        = "${var.project_id}-${var.name}-results"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false
  labels                      = local.labels
  versioning {
    enabled = true # an overwritten or deleted result can be restored
  }
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.results_retention_days
    }
    action {
      type = "Delete"
    }
  }
  lifecycle_rule {
    condition {
      age = 1
    }
    action {
      type = "AbortIncompleteMultipartUpload"
    }
  }
  depends_on = [google_project_service.this]
}

resource "google_artifact_registry_repository" "images" {
  # checkov:skip=CKV_GCP_84:Images hold public code and no data; Google-managed encryption is enough and a CMEK key would outlive `terraform destroy`.
  repository_id = var.name
  location      = var.region
  format        = "DOCKER"
  description   = "attnbench runner and dashboard images"
  labels        = local.labels
  depends_on    = [google_project_service.this]
}

resource "google_artifact_registry_repository_iam_member" "nodes_pull" {
  repository = google_artifact_registry_repository.images.name
  location   = google_artifact_registry_repository.images.location
  role       = "roles/artifactregistry.reader"
  member     = google_service_account.nodes.member
}
