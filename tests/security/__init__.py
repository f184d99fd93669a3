"""
Security regressions: each test replays one attack over a real socket (bounded in size,
count and time) and asserts upstream's answer; ``docs/security.md`` says what each limit
is and why.
"""
