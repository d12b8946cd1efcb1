//! Cost figures on a two-request dataset, every number computed by hand in the comments.

use infertrace_schema::{RequestRow, Status};

use crate::compute::{GroupBy, MetricsOptions};
use crate::cost::{AcceleratorCost, CostError, CostProfile, StorageCost, TokenPrices};
use crate::tests::{S, T0, compute, write};

fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.unwrap_or_else(|| panic!("expected {expected}, got null"));
    assert!((actual - expected).abs() < 1e-9 * expected.abs().max(1.0), "expected {expected}, got {actual}");
}

/// Span 0 → 3600 s: one hour. Raw tokens 1100 + 550 = 1650.
fn rows(status: [Status; 2]) -> Vec<RequestRow> {
    vec![
        RequestRow {
            request_id: "a".into(),
            source: "t".into(),
            status: status[0],
            arrival_time: Some(T0),
            completion_time: Some(T0 + 1800 * S),
            input_tokens: Some(1000),
            cached_tokens: Some(400),
            cached_tokens_remote: Some(300),
            output_tokens: Some(100),
            reasoning_tokens: Some(60),
            ..RequestRow::default()
        },
        RequestRow {
            request_id: "b".into(),
            source: "t".into(),
            status: status[1],
            arrival_time: Some(T0 + 900 * S),
            completion_time: Some(T0 + 3600 * S),
            input_tokens: Some(500),
            output_tokens: Some(50),
            ..RequestRow::default()
        },
    ]
}

fn fleet_profile() -> CostProfile {
    CostProfile {
        accelerator: Some(AcceleratorCost {
            name: Some("X".into()),
            count: 2,
            price_per_hour: 3.0,
            watts: Some(500.0),
            pue: Some(1.2),
        }),
        storage: Some(StorageCost {
            capacity_gb: 730.0,
            price_per_gb_month: 0.1,
            io_price_per_gb: Some(0.5),
            kv_bytes_per_token: Some(1e6),
        }),
        tokens: Some(TokenPrices {
            input_per_million: 1.0,
            cached_input_per_million: Some(0.1),
            output_per_million: 2.0,
        }),
    }
}

#[test]
fn a_fleet_is_charged_for_the_span_and_answers_for_what_succeeded() {
    let dir = tempfile::tempdir().unwrap();
    let data = [write(&dir.path().join("d"), &rows([Status::Ok, Status::Error]), &[])];
    let options = MetricsOptions { cost: Some(fleet_profile()), ..MetricsOptions::default() };
    let c = compute(&data, &options).overall.cost.unwrap();
    close(c.hours, 1.0);
    close(c.share, 1.0);
    // 2 × $3 × 1 h; 2 × 500 W × 1.2 × 1 h = 1.2 kWh; 730 GB × $0.1 × 1 h / 730 h.
    close(c.accelerator_dollars, 6.0);
    close(c.energy_kwh, 1.2);
    close(c.storage_dollars, 0.1);
    // 300 remote tokens × 1 MB = 0.3 GB at $0.5.
    close(c.io_dollars, 0.15);
    close(c.total_dollars, 6.25);
    // a: (600 × 1 + 400 × 0.1 + 100 × 2) / 1e6; b: (500 × 1 + 50 × 2) / 1e6.
    close(c.api_equivalent_dollars, 0.00144);
    assert_eq!(c.token_dollars, None);
    // Only a succeeded.
    assert!(c.outcome_known);
    assert_eq!(
        (c.successful_answers, c.raw_tokens, c.effective_tokens, c.effective_answer_tokens),
        (1, 1650, 1100, 40)
    );
    close(c.per_successful_answer, 6.25);
    close(c.raw_tokens_per_dollar, 1650.0 / 6.25);
    close(c.effective_tokens_per_dollar, 176.0);
    close(c.effective_answer_tokens_per_dollar, 6.4);
    close(c.raw_tokens_per_kwh, 1375.0);
    close(c.effective_tokens_per_kwh, 1100.0 / 1.2);
    close(c.effective_fraction, 2.0 / 3.0);

    // By status: the fleet is split 1100 : 550 by raw tokens; I/O belongs to a.
    let by = MetricsOptions { by: Some(GroupBy::Status), ..options };
    let m = compute(&data, &by);
    let ok = m.groups["ok"].cost.as_ref().unwrap();
    let error = m.groups["error"].cost.as_ref().unwrap();
    close(ok.share, 2.0 / 3.0);
    close(ok.accelerator_dollars, 4.0);
    close(error.accelerator_dollars, 2.0);
    close(ok.total_dollars, 4.0 + 0.1 * 2.0 / 3.0 + 0.15);
    close(error.total_dollars, 2.0 + 0.1 / 3.0);
    assert_eq!(error.per_successful_answer, None);
    close(error.effective_fraction, 0.0);
}

#[test]
fn token_prices_alone_are_the_bill_and_unknown_outcomes_all_count() {
    let dir = tempfile::tempdir().unwrap();
    let data = [write(&dir.path().join("d"), &rows([Status::Unknown, Status::Unknown]), &[])];
    let profile = CostProfile { accelerator: None, storage: None, ..fleet_profile() };
    let c = compute(&data, &MetricsOptions { cost: Some(profile), ..MetricsOptions::default() }).overall.cost.unwrap();
    close(c.token_dollars, 0.00144);
    close(c.total_dollars, 0.00144);
    assert_eq!((c.api_equivalent_dollars, c.accelerator_dollars, c.energy_kwh), (None, None, None));
    // No outcome known: both rows count.
    assert!(!c.outcome_known);
    assert_eq!(c.successful_answers, 2);
    close(c.per_successful_answer, 0.00072);
    close(c.effective_fraction, 1.0);
}

#[test]
fn with_an_slo_only_rows_meeting_it_are_successful() {
    let dir = tempfile::tempdir().unwrap();
    // e2e: a 1800 s, b 2700 s; both ok, only a meets e2e ≤ 2000 s.
    let data = [write(&dir.path().join("d"), &rows([Status::Ok, Status::Ok]), &[])];
    let options = MetricsOptions {
        slo: crate::Slo::parse("e2e=2000s").unwrap(),
        cost: Some(fleet_profile()),
        ..MetricsOptions::default()
    };
    let c = compute(&data, &options).overall.cost.unwrap();
    assert_eq!((c.successful_answers, c.effective_tokens), (1, 1100));
}

#[test]
fn unusable_profiles_are_rejected() {
    assert_eq!(CostProfile::default().validate(), Err(CostError::Empty));
    let mut negative = fleet_profile();
    negative.accelerator.as_mut().unwrap().price_per_hour = -1.0;
    assert_eq!(negative.validate(), Err(CostError::Invalid("accelerator.price_per_hour")));
    let mut no_bytes = fleet_profile();
    no_bytes.storage.as_mut().unwrap().kv_bytes_per_token = None;
    assert_eq!(no_bytes.validate(), Err(CostError::IoWithoutBytes));
    assert_eq!(fleet_profile().validate(), Ok(()));
}
