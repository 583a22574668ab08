"""systemd: units, journal and D-Bus calls (libsystemd, else systemctl)
"""
