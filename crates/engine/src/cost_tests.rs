//! Cost figures on a two-request dataset, every number computed by hand in the comments.

use infertrace_schema::{EngineSample, RequestRow, Status, metrics};

use crate::compute::{GroupBy, MetricsOptions};
use crate::cost::{AcceleratorCost, CostError, CostProfile, EnergyPrice, EnergySource, StorageCost, TokenPrices};
use crate::energy::EnergyFrom;
use crate::tests::{S, T0, compute, follows_the_schema, write};

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
        energy: None,
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

/// Energy samples of three GPUs over the hour of [`rows`].
fn energy_samples() -> Vec<EngineSample> {
    let sample = |instance: &str, at: i64, metric: &str, value| EngineSample {
        time: T0 + at * S,
        source: "dcgm-exporter".into(),
        instance: Some(instance.into()),
        metric: metric.into(),
        value,
        ..EngineSample::default()
    };
    let (counter, power) = (metrics::GPU_ENERGY_JOULES_TOTAL, metrics::GPU_POWER_W);
    vec![
        // g0 has both: the counter is used. +999,000, a reset (+500), +2,000,000 = 2,999,500 J.
        sample("g0", 0, counter, 1_000.0),
        sample("g0", 0, power, 9_999.0),
        sample("g0", 600, counter, 1_000_000.0),
        sample("g0", 1200, counter, 500.0),
        sample("g0", 3600, counter, 2_000_500.0),
        sample("g0", 3600, power, 9_999.0),
        // g1, power only, out of time order in the file: (300 + 500) / 2 × 1800 + (500 + 100) / 2 × 1800
        // = 720,000 + 540,000 = 1,260,000 J.
        sample("g1", 1800, power, 500.0),
        sample("g1", 0, power, 300.0),
        sample("g1", 3600, power, 100.0),
        // g2: one sample measures nothing.
        sample("g2", 0, power, 250.0),
        // h0, a host's CPU packages: 3,600 J.
        sample("h0", 0, metrics::CPU_ENERGY_JOULES_TOTAL, 100.0),
        sample("h0", 3600, metrics::CPU_ENERGY_JOULES_TOTAL, 3_700.0),
    ]
}

#[test]
fn measured_energy_replaces_the_nameplate_and_is_priced() {
    let dir = tempfile::tempdir().unwrap();
    let data = [write(&dir.path().join("d"), &rows([Status::Ok, Status::Error]), &energy_samples())];
    let profile = CostProfile { energy: Some(EnergyPrice { price_per_kwh: 0.25 }), ..fleet_profile() };
    let m = compute(&data, &MetricsOptions { cost: Some(profile), ..MetricsOptions::default() });
    follows_the_schema(&m);
    let energy = m.energy.unwrap();
    let got: Vec<_> = energy
        .instances
        .iter()
        .map(|i| (i.instance.as_str(), i.metric, i.from, i.joules, i.span_s, i.samples, i.resets))
        .collect();
    assert_eq!(
        got,
        [
            ("g0", "gpu_energy_joules_total", EnergyFrom::Counter, 2_999_500.0, 3600.0, 4, 1),
            ("g1", "gpu_power_w", EnergyFrom::Power, 1_260_000.0, 3600.0, 3, 0),
            ("h0", "cpu_energy_joules_total", EnergyFrom::Counter, 3_600.0, 3600.0, 2, 0),
        ]
    );
    close(energy.instances[1].mean_power_w, 350.0);
    // 4,263,100 J = 1.1841944… kWh; raw tokens 1650, output 150.
    let kwh = 4_263_100.0 / 3.6e6;
    close(Some(energy.kwh), kwh);
    close(energy.tokens_per_kwh, 1650.0 / kwh);
    close(energy.output_tokens_per_kwh, 150.0 / kwh);
    let c = m.overall.cost.unwrap();
    // Measured × PUE 1.2, not the nameplate's 1.2 kWh; at $0.25 a kWh, added to the fleet's $6.25.
    assert_eq!(c.energy_from, Some(EnergySource::Measured));
    close(c.energy_kwh, kwh * 1.2);
    close(c.energy_dollars, kwh * 1.2 * 0.25);
    close(c.total_dollars, 6.25 + kwh * 1.2 * 0.25);
    close(c.raw_tokens_per_kwh, 1650.0 / (kwh * 1.2));

    // An API user's bill: the measured energy is reported (no PUE without a fleet), but not charged.
    let profile = CostProfile {
        accelerator: None,
        storage: None,
        energy: Some(EnergyPrice { price_per_kwh: 0.25 }),
        ..fleet_profile()
    };
    let c = compute(&data, &MetricsOptions { cost: Some(profile), ..MetricsOptions::default() }).overall.cost.unwrap();
    close(c.energy_kwh, kwh);
    assert_eq!(c.energy_dollars, None);
    close(c.total_dollars, 0.00144);

    // Without samples the nameplate is used, and said so.
    let data = [write(&dir.path().join("n"), &rows([Status::Ok, Status::Error]), &[])];
    let profile = CostProfile { energy: Some(EnergyPrice { price_per_kwh: 0.25 }), ..fleet_profile() };
    let m = compute(&data, &MetricsOptions { cost: Some(profile), ..MetricsOptions::default() });
    assert_eq!(m.energy, None);
    let c = m.overall.cost.unwrap();
    assert_eq!(c.energy_from, Some(EnergySource::Nameplate));
    close(c.energy_dollars, 1.2 * 0.25);
}
