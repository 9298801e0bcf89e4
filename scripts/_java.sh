#!/usr/bin/env bash
# shellcheck shell=bash
# Java check for falkirk's set-up scripts; sourced by scripts/_env.sh.
#
# Defines functions only (no side effects when sourced). Uses only bash
# builtins plus the java binary itself (no sed/grep/awk), so
# tests/test_packaging.py can run it with PATH pointing at a fake `java`.

# falkirk_java_major VERSION_OUTPUT
#   Print the Java major version found in `java -version` output, e.g.
#   'openjdk version "17.0.15"' -> 17, 'java version "1.8.0_292"' -> 8,
#   'openjdk version "21" 2023-09-19' -> 21, 'openjdk version "22-ea"' -> 22.
#   Returns 1 if no version can be found.
falkirk_java_major() {
    local out=$1 re_quoted='version "([0-9]+)(\.([0-9]+))?' re_bare='(openjdk|java) ([0-9]+)(\.([0-9]+))?'
    local major minor
    if [[ $out =~ $re_quoted ]]; then
        major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[3]}
    elif [[ $out =~ $re_bare ]]; then
        major=${BASH_REMATCH[2]} minor=${BASH_REMATCH[4]}
    else
        return 1
    fi
    # Old scheme: "1.8.0_292" means Java 8.
    if [[ $major == 1 && -n $minor ]]; then
        major=$minor
    fi
    printf '%s\n' "$((10#$major))"
}

_falkirk_java_fail() {
    printf '%s\n' \
        "[setup] error: $1" \
        "[setup] falkirk's Spark features need Java 17 or newer (PySpark 4.x); install e.g." \
        "[setup] \`apt-get install openjdk-17-jre-headless\` or set JAVA_HOME to a Java 17+ installation." >&2
    return 1
}

# falkirk_check_java
#   Succeeds if the Java that PySpark would use ($JAVA_HOME/bin/java if
#   JAVA_HOME is set, else `java` on PATH) is version 17 or newer; otherwise
#   prints a clear message to stderr and returns 1.
falkirk_check_java() {
    local java out major
    if [[ -n ${JAVA_HOME:-} ]]; then
        java=$JAVA_HOME/bin/java
        if [[ ! -x $java ]]; then
            _falkirk_java_fail "JAVA_HOME is set to '$JAVA_HOME' but '$java' is not an executable."
            return 1
        fi
    elif ! java=$(command -v java); then
        _falkirk_java_fail "no 'java' found on PATH (and JAVA_HOME is not set)."
        return 1
    fi
    if ! out=$("$java" -version 2>&1); then
        _falkirk_java_fail "'$java -version' failed: ${out:-no output}"
        return 1
    fi
    if ! major=$(falkirk_java_major "$out"); then
        _falkirk_java_fail "could not read a version from '$java -version': ${out:-no output}"
        return 1
    fi
    if ((major < 17)); then
        _falkirk_java_fail "found Java $major at '$java'."
        return 1
    fi
    return 0
}
