//! The hub's integration tests, one binary so that a change links one test program: a module
//! per area, each starting with what it proves. Tests that need a server start a private one.

mod alert_rules;
mod api;
mod arrivals;
mod common;
mod explain;
mod gate;
mod insights;
mod maintained;
mod metrics;
mod oidc;
mod one_definition;
mod openapi_schemas;
mod otlp;
mod pages;
mod params;
mod past_moments;
mod render_visibility;
mod rollouts;
mod serving;
mod ties;
