//! Unit tests of confirmation tokens.

use super::*;
use crate::domain::{ErrorClass, Tool};

#[test]
fn read_only_tools_never_need_confirmation() {
    assert_eq!(decide(Tool::ListSkills.spec(), None).unwrap(), None);
    assert_eq!(
        decide(Tool::ReadAudit.spec(), Some(Confirmation::HostMeta)).unwrap(),
        None
    );
}

#[test]
fn an_unconfirmed_audit_append_is_denied() {
    let err = decide(Tool::AppendAudit.spec(), None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::AuthzDenied);
}

fn principal() -> Principal {
    Principal::new(TenantId::parse(TENANT).unwrap(), "a", &[])
}

const TENANT: &str = "11111111-1111-4111-8111-111111111111";
const NOW: Timestamp = Timestamp::from_unix_millis(1_000_000_000);

fn claims() -> ConfirmationClaims {
    ConfirmationClaims {
        tenant: TenantId::parse(TENANT).unwrap(),
        subject: "a".into(),
        purpose: Some(PURPOSE.into()),
        tool: "cyberos.memory.append_audit".into(),
        args_sha256: "ab".repeat(32),
        jti: "j1".into(),
        expires_at: NOW.plus_millis(60_000),
        issued_at: Some(NOW),
    }
}

fn check(c: &ConfirmationClaims) -> Result<(), DomainError> {
    check_token(
        c,
        &principal(),
        "cyberos.memory.append_audit",
        &"AB".repeat(32),
        NOW,
    )
}

#[test]
fn a_matching_token_confirms() {
    assert!(check(&claims()).is_ok());
}

fn refused(c: &ConfirmationClaims) -> String {
    let err = check(c).unwrap_err();
    assert_eq!(err.class(), ErrorClass::AuthzDenied, "{c:?}");
    err.to_string()
}

#[test]
fn a_token_for_anything_else_is_refused() {
    let other_tenant = ConfirmationClaims {
        tenant: TenantId::parse("22222222-2222-4222-8222-222222222222").unwrap(),
        ..claims()
    };
    let other_tool = ConfirmationClaims {
        tool: "cyberos.cuo.route".into(),
        ..claims()
    };
    let other_args = ConfirmationClaims {
        args_sha256: "cd".repeat(32),
        ..claims()
    };
    assert!(refused(&other_tenant).contains("another tenant"));
    assert!(refused(&other_tool).contains("another tool"));
    assert!(refused(&other_args).contains("other arguments"));
}

#[test]
fn the_purpose_claim_is_required() {
    for purpose in [None, Some(String::new()), Some("access".into())] {
        let c = ConfirmationClaims {
            purpose,
            ..claims()
        };
        assert!(refused(&c).contains("purpose"), "{c:?}");
    }
}

#[test]
fn the_token_binds_the_caller() {
    let c = ConfirmationClaims {
        subject: "someone-else".into(),
        ..claims()
    };
    let message = refused(&c);
    assert!(message.contains("another user"), "{message}");
    assert!(!message.contains("someone-else"), "{message}");
}

#[test]
fn expiry_is_bounded_against_the_clock_not_against_iat() {
    let expired = ConfirmationClaims {
        expires_at: NOW,
        ..claims()
    };
    assert!(refused(&expired).contains("expired"));
    // iat a year ahead with a 4-minute "lifetime": valid for a year by iat alone.
    let year = 365 * 24 * 3600 * 1000;
    let far = ConfirmationClaims {
        issued_at: Some(NOW.plus_millis(year)),
        expires_at: NOW.plus_millis(year + 240_000),
        ..claims()
    };
    assert!(refused(&far).contains("longer than 5 minutes"));
    let long_lived_no_iat = ConfirmationClaims {
        issued_at: None,
        expires_at: NOW.plus_millis(10 * 60_000),
        ..claims()
    };
    assert!(refused(&long_lived_no_iat).contains("longer than 5 minutes"));
    // Minted for 10 minutes, 6 already gone: still more than 5 minutes of lifetime.
    let long_lived = ConfirmationClaims {
        issued_at: Some(NOW.plus_millis(-6 * 60_000)),
        expires_at: NOW.plus_millis(4 * 60_000),
        ..claims()
    };
    assert!(refused(&long_lived).contains("longer than 5 minutes"));
    let dated_ahead = ConfirmationClaims {
        issued_at: Some(NOW.plus_millis(60_000)),
        ..claims()
    };
    assert!(refused(&dated_ahead).contains("future"));
    // Exactly 5 minutes ahead, and within the skew, are fine.
    for ahead in [MAX_TOKEN_LIFETIME_MS, MAX_TOKEN_LIFETIME_MS + SKEW_MS] {
        let edge = ConfirmationClaims {
            issued_at: None,
            expires_at: NOW.plus_millis(ahead),
            ..claims()
        };
        assert!(check(&edge).is_ok(), "{ahead}");
    }
}

#[test]
fn verifier_refusals_name_the_confirmation_token_and_stay_user_safe() {
    for (r, words) in [
        (TokenRejection::WrongAudience, "not issued for this bridge"),
        (TokenRejection::Expired, "expired"),
        (
            TokenRejection::MissingClaim("aud".into()),
            "lacks the aud claim",
        ),
        (TokenRejection::BadSignature, "not valid"),
    ] {
        let err = token_rejected(r);
        assert_eq!(err.class(), ErrorClass::AuthzDenied);
        assert!(err.to_string().contains(words), "{err}");
        assert!(err.to_string().starts_with("the confirmation token"));
    }
}

#[test]
fn any_evidence_confirms_and_is_reported() {
    for how in [
        Confirmation::HostMeta,
        Confirmation::SeedFlag,
        Confirmation::Token,
        Confirmation::Elicited,
    ] {
        assert_eq!(
            decide(Tool::AppendAudit.spec(), Some(how)).unwrap(),
            Some(how)
        );
    }
}
