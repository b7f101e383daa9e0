"""Teachers: models whose contextual token vectors and pooled sentence vectors we distil from."""
from swembed.teachers.base import TeacherError, TeacherOutput
from swembed.teachers.registry import TEACHERS, TeacherSpec, load_teacher, resolve_teacher

__all__ = ["TEACHERS", "TeacherError", "TeacherOutput", "TeacherSpec", "load_teacher", "resolve_teacher"]
