"""systemd: units, the journal and any D-Bus call, through libsystemd (systemctl where it is missing).
"""
