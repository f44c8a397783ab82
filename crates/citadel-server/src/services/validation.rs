//! Request field rules for the auth and profile routes (services.md §2.2,
//! §2.3, §2.7). Each check returns a short, client-safe message that never
//! echoes the value.

/// Largest id, username and display name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

/// Device or custom id: 1–128 bytes, no control characters.
pub fn check_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > MAX_NAME_BYTES || has_control(id) {
        return Err("id must be 1-128 bytes without control characters");
    }
    Ok(())
}

/// Username: 1–128 bytes, no control characters.
pub fn check_username(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES || has_control(name) {
        return Err("username must be 1-128 bytes without control characters");
    }
    Ok(())
}

/// Display name: 1–128 bytes, no control characters (our choice; the
/// reference leaves the limit open).
pub fn check_display_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES || has_control(name) {
        return Err("display_name must be 1-128 bytes without control characters");
    }
    Ok(())
}

/// Normalises and checks an email: trimmed, ASCII-lowercased, ASCII only,
/// at most 254 bytes, exactly one `@` with a non-empty local part, and a
/// domain that has a dot and does not start or end with one.
pub fn normalize_email(raw: &str) -> Result<String, &'static str> {
    const BAD: &str = "email is not a valid address";
    let email = raw.trim().to_ascii_lowercase();
    if email.is_empty()
        || email.len() > 254
        || !email.is_ascii()
        || has_control(&email)
        || email.contains(' ')
    {
        return Err(BAD);
    }
    let mut parts = email.split('@');
    let (Some(local), Some(domain), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(BAD);
    };
    if local.is_empty() || !domain.contains('.') || domain.starts_with('.') || domain.ends_with('.')
    {
        return Err(BAD);
    }
    Ok(email)
}

/// Password: 8–1024 bytes, no control characters, not all whitespace; never
/// normalised.
pub fn check_password(password: &str) -> Result<(), &'static str> {
    if password.len() < 8
        || password.len() > 1024
        || has_control(password)
        || password.trim().is_empty()
    {
        return Err("password must be 8-1024 bytes, not blank, without control characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn email_rules() {
        assert_eq!(
            normalize_email("  Alice@Example.COM ").unwrap(),
            "alice@example.com"
        );
        for bad in [
            "a@b", "a@.b.c", "a@b.c.", "@b.c", "a@@b.c", "a@b@c.d", "ä@b.c", "a b@c.d", "",
        ] {
            assert!(normalize_email(bad).is_err(), "{bad}");
        }
        assert!(normalize_email(&format!("{}@b.co", "a".repeat(250))).is_err());
    }

    #[test]
    fn other_rules() {
        assert!(check_password("correct horse").is_ok());
        assert!(check_password("short").is_err());
        assert!(check_password("        ").is_err());
        assert!(check_password("with\ttabs!").is_err());
        assert!(check_id(&"x".repeat(128)).is_ok());
        assert!(check_id(&"x".repeat(129)).is_err());
        assert!(check_username("bob\n").is_err());
    }
}
