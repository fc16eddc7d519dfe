//! The error answers the document lists once (`components/responses`) and the routes refer
//! to: each a description with the [`ErrorBody`] schema.

use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::{Content, Ref, RefOr};
use utoipa::{ToResponse, ToSchema};

use crate::answers::ErrorBody;

/// A reusable error answer: a description and the [`ErrorBody`] schema.
fn error_response(description: &str) -> RefOr<Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name(ErrorBody::name()))),
        )
        .into()
}

macro_rules! error_responses {
    ($($name:ident: $description:literal;)+) => {
        $(
            #[doc = $description]
            #[derive(Debug)]
            pub struct $name;

            impl<'r> ToResponse<'r> for $name {
                fn response() -> (&'r str, RefOr<Response>) {
                    (stringify!($name), error_response($description))
                }
            }
        )+

        /// Every error answer, as the document's `components/responses`.
        pub fn error_components() -> Vec<(&'static str, RefOr<Response>)> {
            vec![$(<$name as ToResponse>::response()),+]
        }
    };
}

error_responses! {
    BadRequest: "A parameter is unknown, repeated or invalid; `parameter` names it.";
    Unauthorized: "No valid bearer token: none, one the token file does not admit, or a JWT of the identity provider that is expired, not yet valid, of another issuer or audience, or whose signature does not verify (`error` says which).";
    Forbidden: "A valid JWT of the identity provider whose groups give no role on this hub.";
    NotFound: "No such cluster within the caller's scope.";
    Unavailable: "ClickHouse did not answer, the request was still unanswered at its 30 s deadline, or the identity provider's keys could not be fetched to check a JWT (each with `Retry-After`).";
}
