//! A JWKS endpoint for the identity tests, on 127.0.0.1:0, whose key set can be swapped
//! (or taken down) while the bridge runs.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// A JWKS endpoint whose key set can be swapped, on 127.0.0.1:0.
pub struct JwksServer {
    pub url: String,
    keys: Arc<Mutex<Value>>,
}

impl JwksServer {
    pub fn start(initial: Value) -> JwksServer {
        let keys = Arc::new(Mutex::new(initial));
        let shared = Arc::clone(&keys);
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let keys = Arc::clone(&shared);
                async move {
                    let v = keys.lock().unwrap().clone();
                    if v.is_null() {
                        (
                            axum::http::StatusCode::SERVICE_UNAVAILABLE,
                            axum::Json(json!({})),
                        )
                            .into_response_parts()
                    } else {
                        (axum::http::StatusCode::OK, axum::Json(v)).into_response_parts()
                    }
                }
            }),
        );
        JwksServer {
            url: format!("http://{}/jwks", crate::support::serve_http(app)),
            keys,
        }
    }

    pub fn set(&self, keys: Value) {
        *self.keys.lock().unwrap() = keys;
    }
}

trait IntoParts {
    fn into_response_parts(self) -> axum::response::Response;
}

impl<T: axum::response::IntoResponse> IntoParts for T {
    fn into_response_parts(self) -> axum::response::Response {
        self.into_response()
    }
}
